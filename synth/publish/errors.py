"""Why a publish stops: errors the CLI prints as one line (exit 2), kept apart so that every module of
the package can raise them."""

from __future__ import annotations

from synth.engine.errors import InputError


class PublishError(InputError):
    """The DIR cannot be published as it is, or the target is wrong (the CLI exits 2)."""


class HubError(PublishError):
    """A Hub call failed; the message is scrubbed of the token."""


__all__ = ["HubError", "PublishError"]
