"""Query parameters of the list endpoints: each takes one value, so a repeat is refused
rather than one of the values being picked silently."""

import uuid

from rest_framework.request import Request

from web.errors import InvalidInput


def single_query_param(request: Request, name: str) -> str | None:
    """The value of `name`, None when absent; InvalidInput when it is given more than once."""
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise InvalidInput({name: ["Give this query parameter once."]})
    return values[0] if values else None


def uuid_query_param(request: Request, name: str) -> uuid.UUID | None:
    """The UUID `name` names, None when absent; InvalidInput unless one ASCII UUID."""
    raw = single_query_param(request, name)
    if raw is None:
        return None
    try:
        if not raw.isascii():
            raise ValueError(raw)
        return uuid.UUID(raw)
    except ValueError:
        raise InvalidInput({name: ["Must be a UUID."]}) from None
