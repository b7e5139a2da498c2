"""Answer values as plain data: what a student's kernel hands the grader, and how the grader reads it.

:func:`dump` runs in the student's kernel (or the function host): it turns the
named variables into JSON made of numbers, strings, booleans, ``None``, lists,
dicts, a pint Quantity as ``{"__pb__": "quantity", "magnitude", "units"}``,
a function as ``{"__pb__": "function"}``, the unanswered sentinel ``...``
as ``{"__pb__": "unanswered"}`` and anything else as its type name.
Nothing there is trusted: the student can replace :func:`dump` itself and
send any JSON.  :func:`load` runs in the grader and accepts only that shape,
bounded in size and depth, so the worst a kernel can do is claim a value
(which then has to be right to earn a point).
"""

from __future__ import annotations

import json
import re

MAX_TEXT = 10_000  # characters of one string
MAX_ITEMS = 1_000  # items of one list or dict
MAX_DEPTH = 6
MAX_JSON = 4_000_000  # characters of the whole answer set
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def encode(value, depth: int = 0):
    """One value as plain JSON data (kernel side; base-type slots only, no student __dunder__ calls)."""
    t = type(value)
    if value is None or t is bool:
        return value
    if value is Ellipsis:  # a released answer cell not answered yet (checks.UNANSWERED)
        return {"__pb__": "unanswered"}
    if t is int or (isinstance(value, int) and not isinstance(value, bool)):
        return int.__index__(value) if abs(int.__index__(value)) < 2**63 else float(int.__index__(value))
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)[:MAX_TEXT]
    if depth >= MAX_DEPTH:
        return {"__pb__": "object", "type": "too_deep"}
    if t.__module__ == "numpy" and hasattr(value, "dtype") and getattr(value, "shape", None) == ():
        return encode(value.item(), depth)
    if t.__name__ == "Quantity" and t.__module__.startswith("pint"):
        try:
            mag = object.__getattribute__(value, "_magnitude")
            units = object.__getattribute__(value, "_units")
            items = dict.items(object.__getattribute__(units, "_d"))
            text = " * ".join(f"({str.__str__(u)})**{float.__float__(float(e))!r}" for u, e in items) or "dimensionless"
            return {"__pb__": "quantity", "magnitude": encode(mag, depth + 1), "units": text}
        except Exception:
            return {"__pb__": "object", "type": "Quantity"}
    if isinstance(value, (list, tuple)):
        return {"__pb__": t is tuple and "tuple" or "list",
                "items": [encode(v, depth + 1) for v in list.__iter__(list(value)[:MAX_ITEMS])]}
    if isinstance(value, dict):
        pairs = list(dict.items(value))[:MAX_ITEMS]
        return {"__pb__": "dict", "items": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in pairs]}
    if callable(value) and t.__name__ in ("function", "builtin_function_or_method", "method"):
        return {"__pb__": "function"}
    return {"__pb__": "object", "type": str.__str__(t.__name__)[:64]}


def dump(namespace: dict, names) -> str:
    """JSON of ``{name: plain value}`` for the names defined in ``namespace`` (kernel side)."""
    out = {}
    for name in names:
        if name in namespace:
            try:
                out[name] = encode(namespace[name])
            except Exception as exc:  # a value that breaks the encoder is simply not an answer
                out[name] = {"__pb__": "object", "type": type(exc).__name__}
    return json.dumps(out)


class Opaque:
    """Stands for a student's value that is not plain data (an object of a class they wrote)."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self):
        return f"<{self.type_name} 类型的对象>"


class UnreadQuantity(Opaque):
    """A Quantity whose units are not names of the course's table (an expression, say): kept unread."""

    def __init__(self):
        super().__init__("Quantity")


class Function:
    """Stands for a student's function: the grader calls it through :mod:`.trusted`, never here."""


def _type_named(name) -> type:
    name = name if isinstance(name, str) and _NAME.match(name) else "object"
    return type(name, (Opaque,), {})


def decode(data, depth: int = 0):
    """Grader side: plain JSON data -> Python value; refuses anything else with ValueError."""
    if depth > MAX_DEPTH + 1:
        raise ValueError("too deep")
    if data is None or type(data) in (bool, int, float):
        return data
    if type(data) is str:
        return data[:MAX_TEXT]
    if type(data) is list:  # plain JSON lists (a hand-made answer set) are lists
        return [decode(v, depth + 1) for v in data[:MAX_ITEMS]]
    if type(data) is not dict:
        raise ValueError("not plain data")
    kind = data.get("__pb__")
    if kind == "quantity":
        from ..model.units import Q_, unit_of_text

        mag, units = decode(data.get("magnitude"), depth + 1), data.get("units")
        if type(mag) not in (int, float) or type(units) is not str or len(units) > 200:
            raise ValueError("bad quantity")
        unit = unit_of_text(units)  # a grammar of known unit names and small powers; pint never parses the text
        if unit is None or (type(mag) is int and abs(mag) >= 2**63):
            return UnreadQuantity()
        return Q_(float(mag), unit)
    if kind in ("list", "tuple"):
        items = [decode(v, depth + 1) for v in list(data.get("items") or [])[:MAX_ITEMS]]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        out = {}
        for pair in list(data.get("items") or [])[:MAX_ITEMS]:
            if type(pair) is list and len(pair) == 2:
                key = decode(pair[0], depth + 1)
                if type(key) in (str, int, float, bool) or key is None:
                    out[key] = decode(pair[1], depth + 1)
        return out
    if kind == "function":
        return Function()
    if kind == "unanswered":
        return Ellipsis
    name = data.get("type", "object")
    return _type_named(name)(name if isinstance(name, str) else "object")


def load(text) -> dict:
    """Grader side: the kernel's answer JSON -> ``{name: value}``; malformed input gives ``{}``."""
    if type(text) is not str or len(text) > MAX_JSON:
        return {}
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # 4 MB of "[[[[..." nests past the decoder's recursion limit
        return {}
    if type(data) is not dict:
        return {}
    out = {}
    for name, value in list(data.items())[:MAX_ITEMS]:
        if type(name) is str and _NAME.match(name):
            try:
                out[name] = decode(value)
            except (ValueError, RecursionError):
                out[name] = Opaque("object")
    return out
