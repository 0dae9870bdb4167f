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
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from django.db import models
from django.db.models import signals
from django.db.models.base import ModelState
from django.db.models.fields import NOT_PROVIDED

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
    defaults = _defaults(model)
    unknown = values.keys() - defaults.constant.keys() - defaults.called.keys()
    if unknown:
        raise TypeError(f"{model.__name__} has no field {', '.join(sorted(unknown))}")
    attributes = {**defaults.constant, **values}
    for attname, default in defaults.called.items():
        if attname not in values:
            attributes[attname] = default()
    instance = model.__new__(model)
    instance.__dict__.update(attributes)
    instance._state = ModelState()
    return instance


def _initialised(model: type[models.Model]) -> bool:
    """Whether something listens to the model's construction: then only __init__ will do."""
    return signals.pre_init.has_listeners(model) or signals.post_init.has_listeners(model)


@dataclass(frozen=True)
class _Defaults:
    """A model's field defaults: the values (shared by every instance, as Django shares a
    default that is not a callable) and the callables, called for each instance."""

    constant: dict[str, Any]
    called: dict[str, Callable[[], Any]]


@cache
def _defaults(model: type[models.Model]) -> _Defaults:
    constant, called = {}, {}
    for field in model._meta.concrete_fields:
        if field.has_default() and callable(field.default):
            called[field.attname] = field.default
        elif field.db_default is not NOT_PROVIDED:
            called[field.attname] = field.get_default  # a new DatabaseDefault each time
        else:
            constant[field.attname] = field.get_default()
    return _Defaults(constant=constant, called=called)
