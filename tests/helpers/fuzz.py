"""Hostile values for the API fuzz tests: JSON values of every shape, odd numbers, schema bombs."""

from __future__ import annotations

from hypothesis import strategies as st

odd_numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -1, 1e308, -1e308, 2**63, 1e-320]),
)


scalars = st.one_of(
    st.none(), st.booleans(), odd_numbers, st.text(max_size=50), st.just("x" * 5000)
)


json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


schema_bombs = st.sampled_from(
    [
        {"type": "string", "maxLength": 20000},
        {"type": "string", "minLength": 10**8},
        {"enum": list(range(5000))},
        {"type": "object", "properties": [1, 2]},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
        {"anyOf": "nope"},
        {"type": "array", "items": {"type": "array", "items": {"type": "array"}}, "maxItems": -3},
        {"type": ["string", 5]},
        {"pattern": "(" * 2000},
        {"required": {"a": 1}},
    ]
)
