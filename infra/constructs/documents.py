"""The probe-only Session Manager documents: one `AWS::SSM::Document` (type Session,
NonInteractiveCommands, no parameters) per probe role, with the probe script as shipped embedded as
its only command. The ProbeNode role may start sessions with these documents and no other, so the
monitor can run exactly the probe on a node and nothing else.

The content comes from the runtime (`hyperpod_nccl.probe.documents`), read at synth time, so the
deployed document is the script of this checkout, byte for byte.
"""

from __future__ import annotations

from aws_cdk import aws_ssm as ssm
from constructs import Construct

from hyperpod_nccl.probe import documents


class ProbeDocuments(Construct):
    """The stack's probe documents, named `<stackName>-NodeProbe` and `<stackName>-SlurmControllerProbe`."""

    def __init__(self, scope: Construct, construct_id: str, *, stack_name: str) -> None:
        super().__init__(scope, construct_id)
        self.names: dict[str, str] = {}
        self.documents: dict[str, ssm.CfnDocument] = {}
        for role, name in documents.document_names(stack_name).items():
            self.names[role] = name
            size = len(documents.content_text(role).encode("utf-8"))
            if size > documents.MAX_DOCUMENT_BYTES:
                raise ValueError(
                    f"the {role} probe document is {size} bytes; SSM documents hold at most"
                    f" {documents.MAX_DOCUMENT_BYTES}: shorten the probe script"
                )
            self.documents[role] = ssm.CfnDocument(
                self,
                documents.DOCUMENT_SUFFIXES[role],
                name=name,
                document_type=documents.DOCUMENT_TYPE,
                document_format="JSON",
                content=documents.document_content(role),
                # A changed probe becomes the document's new default version; replacing a named
                # document would need a new name.
                update_method="NewVersion",
            )
