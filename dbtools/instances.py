"""Model instances made without `Model.__init__`, for the rows a hot path makes by the
thousand (the tick's claimed rows and its delivery log).

`Model.__init__` sets every field through `setattr` (a foreign key through its descriptor)
and sends `pre_init` and `post_init`: for the tick's 45-column notification it cost more
than decoding the row. An instance is its `__dict__` of attribute values and its `_state`,
which is how Django itself rebuilds one it unpickles (`Model.__setstate__`); `loaded` and
`fresh` build exactly that. A model something listens to `pre_init` or `post_init` for
(an image field's dimensions, a generic relation) gets `Model.__init__` as before, signals
and all.
"""

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, TypeVar

from django.db import models
from django.db.models import signals
from django.db.models.base import ModelState

M = TypeVar("M", bound=models.Model)


def loaded(model: type[M], attnames: Sequence[str], values: Sequence[Any], using: str) -> M:
    """What `model.from_db(using, attnames, values)` gives for every concrete field's
    attname in `attnames` (the values already converted from the database's)."""
    if _initialised(model):
        return model.from_db(using, attnames, values)
    instance = model.__new__(model)
    instance.__dict__.update(zip(attnames, values, strict=True))
    instance._state = ModelState()
    instance._state.adding, instance._state.db = False, using
    return instance


def fresh(model: type[M], **values: Any) -> M:
    """What `model(**values)` gives, `values` named by attname (`tenant_id`, not `tenant`);
    every other field takes its default."""
    if _initialised(model):
        return model(**values)
    attributes = {}
    for attname, default in _defaults(model):
        attributes[attname] = values.pop(attname) if attname in values else default()
    if values:
        raise TypeError(f"{model.__name__} has no field {', '.join(sorted(values))}")
    instance = model.__new__(model)
    instance.__dict__.update(attributes)
    instance._state = ModelState()
    return instance


def _initialised(model: type[models.Model]) -> bool:
    """Whether something listens to the model's construction: then only __init__ will do."""
    return signals.pre_init.has_listeners(model) or signals.post_init.has_listeners(model)


@cache
def _defaults(model: type[models.Model]) -> tuple[tuple[str, Callable[[], Any]], ...]:
    return tuple((field.attname, field.get_default) for field in model._meta.concrete_fields)
