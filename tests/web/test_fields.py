"""FieldsBoundOnce: one set of bound fields per class, and each instance's own outcome."""

from rest_framework import serializers

from web.fields import FieldsBoundOnce, StrictCharField


class Shape(FieldsBoundOnce, serializers.Serializer):
    name = StrictCharField(max_length=5)
    tags = serializers.ListField(child=serializers.EmailField(), required=False, default=list)


def test_instances_share_one_bound_set_of_fields():
    first, second = Shape(data={}), Shape(data={})

    assert first.fields is second.fields
    assert list(first.fields) == ["name", "tags"]
    assert first.fields["name"].parent is not first  # a prototype without data holds them


def test_each_instance_keeps_its_own_data_errors_and_result():
    bad = Shape(data={"name": "too long", "tags": ["nope"]})
    good = Shape(data={"name": "ok"})

    assert not bad.is_valid()
    assert good.is_valid()
    assert set(bad.errors) == {"name", "tags"}
    assert good.errors == {}
    assert good.validated_data == {"name": "ok", "tags": []}
    assert Shape(data={"name": 5}).is_valid() is False
