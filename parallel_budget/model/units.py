"""The course's one unit registry, and parsing and formatting of quantities.

Every other module converts its arguments here, so the rules live in one place:

* ``GB`` is 10**9 bytes, ``Gb`` is 10**9 bits, ``GiB`` is 2**30 bytes.
* A plain number is read in SI base units: bytes, bytes per second, seconds.
* A string (``"2 GB"``, ``"25 Gb/s"``, ``"400 ms"``) or a pint Quantity of
  this registry is converted; a value of the wrong dimension raises one
  ``ValueError`` that names the argument, what was given and what is accepted.

The registry is small on purpose.  pint's default registry reads ``Gb`` as
gilbert and treats bits as dimensionless, which would let ``"25 GB"`` pass as a
bandwidth; this one knows only time and information.
"""

from __future__ import annotations

import math
import numbers
import re

import pint

from .unit_text import MAX_TEXT_CHARS, MAX_UNIT_TERMS, QUANTITY_TEXT, UNIT_NAME, UNIT_SPELLINGS, unit_items

_DEFINITIONS = """
nano- = 1e-9 = n-
micro- = 1e-6 = u- = µ-
milli- = 1e-3 = m-
kilo- = 1e3 = k-
mega- = 1e6 = M-
giga- = 1e9 = G-
tera- = 1e12 = T-
peta- = 1e15 = P-
kibi- = 2**10 = Ki-
mebi- = 2**20 = Mi-
gibi- = 2**30 = Gi-
tebi- = 2**40 = Ti-
second = [time] = s = sec
minute = 60 * second = min
hour = 60 * minute = h = hr
bit = [information] = b
byte = 8 * bit = B
"""

ureg = pint.UnitRegistry(None, autoconvert_offset_to_baseunit=False)
for _line in _DEFINITIONS.strip().splitlines():
    ureg.define(_line)
ureg.formatter.default_format = "~"
Q_ = ureg.Quantity
Quantity = ureg.Quantity

# What each kind of argument accepts, for messages and for the calculators.
KINDS = {
    "bytes": {
        "dim": "[information]",
        "base": "byte",
        "symbol": "B",
        "zh": "数据量",
        "units": "B, kB, MB, GB, TB, KiB, MiB, GiB, TiB, b, Mb, Gb",
        "example": '"2 GB"',
    },
    "bandwidth": {
        "dim": "[information] / [time]",
        "base": "byte / second",
        "symbol": "B/s",
        "zh": "带宽",
        "units": "B/s, MB/s, GB/s, GiB/s, Mb/s, Gb/s",
        "example": '"25 GB/s"',
    },
    "time": {
        "dim": "[time]",
        "base": "second",
        "symbol": "s",
        "zh": "时间",
        "units": "s, ms, us, ns, min, h",
        "example": '"400 ms"',
    },
}

_DIM_NAMES_ZH = {
    "[information]": "数据量",
    "[information] / [time]": "带宽",
    "[time]": "时间",
    "dimensionless": "纯数字",
}


def _describe_dim(q) -> str:
    key = str(q.dimensionality)
    return _DIM_NAMES_ZH.get(key) or f"单位为 {q.units:~} 的量"


def _where(func: str, arg: str) -> str:
    return f"{func}() 的参数 {arg}" if func else f"参数 {arg}"


# Lower-case prefixes of bytes and bits.  pint reads "mb" as millibits and "mB" as millibytes, "kb" is
# kilobits and "gb" nothing: a reader who writes them means megabytes or megabits, which differ 8x.  So
# each is refused with its two readings.  model.js's AMBIGUOUS is the same pattern (shared vectors).
AMBIGUOUS = re.compile(r"(?<![A-Za-zµ])(?!kB)([kmgtp])([bB])(/s|ps)?(?![A-Za-z])")
_PREFIX_ZH = {"k": "千", "M": "兆", "G": "吉", "T": "太", "P": "拍"}


def ambiguous_unit(text: str):
    """``(unit as written, bytes reading, bits reading)`` of the first ambiguous unit in ``text``, else None.

    ``"1006.63 mb"`` -> ``("mb", "MB", "Mb")``; ``"2 kb/s"`` -> ``("kb/s", "kB/s", "kbit/s")``.
    """
    m = AMBIGUOUS.search(text)
    if not m:
        return None
    p = "k" if m.group(1) == "k" else m.group(1).upper()
    per = "/s" if m.group(3) else ""
    return m.group(0), f"{p}B{per}", ("kbit" if p == "k" else f"{p}b") + per


def ambiguity_message(text: str) -> str | None:
    """The Chinese sentence that refuses an ambiguous unit in ``text`` (naming both readings), or None."""
    found = ambiguous_unit(text)
    if found is None:
        return None
    unit, by, bi = found
    zh, per = _PREFIX_ZH[by[0]], "每秒" if by.endswith("/s") else ""
    return (f"单位 {unit} 有歧义：可能指 {by}（{zh}字节{per}）或 {bi}（{zh}比特{per}，只有 {by} 的 1/8）；"
            f"请写 {by} 或 {bi}")


# ---------------------------------------------------------------- reading typed quantities (a grammar)
# Typed text is read by a grammar (:mod:`.unit_text`), never by pint's expression parser; pint only
# ever sees a float and a unit of the fixed table (model.js's parseQuantity reads the same grammar).
_UNITS = {symbol: ureg.Unit(symbol) for _, symbol in UNIT_SPELLINGS.values()}  # pint on fixed strings only


def _shown(value) -> str:
    """``repr`` of a value for a message, cut when long (a student's 10 000-character string is not echoed)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _read_text(value: str, where: str, accepted: str, spec: dict):
    """A typed quantity read by the grammar above: a Quantity, or ValueError naming what was wrong."""
    text = value.strip()
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"{where} 太长（{len(value)} 个字符，最多 {MAX_TEXT_CHARS} 个），没有读取：{_shown(value)}。"
                         f"请只写一个数和单位。{accepted}")
    text = text.replace("Gbps", "Gb/s").replace("GBps", "GB/s")
    if not text:
        raise ValueError(f"{where} 是空字符串。{accepted}")
    m = QUANTITY_TEXT.fullmatch(text)
    if not m:
        raise ValueError(f"{where} 应以数字开头（最多 30 位数字，指数最多 4 位），收到 {_shown(value)}。{accepted}")
    ambiguous = ambiguity_message(text)
    if ambiguous:
        raise ValueError(f"{where} 的{ambiguous}（收到 {_shown(value)}）。{accepted}")
    number, written = float(m.group(1)), re.sub(r"\s*/\s*", "/", (m.group(2) or "").strip())
    if not written:
        return Q_(number, spec["base"])
    found = UNIT_SPELLINGS.get(written)
    if found is None:
        hint = "；KB 有歧义，请写 kB（1000 B）或 KiB（1024 B）" if "KB" in written else ""
        raise ValueError(f"{where} 含未知单位 {written!r}（收到 {_shown(value)}）{hint}。只写一个数和一个单位。{accepted}")
    return Q_(number, _UNITS[found[1]])


def unit_of_items(items):
    """A pint Unit of this registry from ``(name, exponent)`` pairs (a Quantity taken apart), or None.

    Each name must be one identifier this registry knows (``gigabyte``, ``GB``, ``second``), each
    exponent a small integer: the names go to pint one at a time, never as an expression.
    """
    unit = ureg.Unit("")
    items = list(items)
    if len(items) > MAX_UNIT_TERMS:
        return None
    for name, exp in items:
        if type(name) is not str or not UNIT_NAME.fullmatch(name) or type(exp) not in (int, float):
            return None
        if not math.isfinite(exp) or exp != int(exp) or not 1 <= abs(exp) <= 3:
            return None
        try:
            if name not in ureg:
                return None
            unit = unit * ureg.Unit(name) ** int(exp)
        except Exception:
            return None
    return unit


def unit_of_text(text: str):
    """The Unit of a taken-apart Quantity's unit text (``"(gigabyte)**1.0 * (second)**-1.0"``), or None."""
    items = unit_items(text)
    return None if items is None else unit_of_items(items)

def parse(value, kind: str, *, arg: str = "value", func: str = "") -> pint.Quantity:
    """Return ``value`` as a Quantity of ``kind`` ('bytes', 'bandwidth', 'time').

    Accepts a plain real number (read in the kind's SI base unit), a string with
    a unit, or a Quantity of this registry.  Raises ``ValueError`` with a message
    that names ``arg``, the given value and the accepted units.  Negative values,
    NaN and infinity are refused, and so are lower-case prefixes of bytes and
    bits (``"mb"``, ``"kb"``, ``"mB"``: :func:`ambiguous_unit`).
    """
    spec = KINDS[kind]
    where = _where(func, arg)
    accepted = f"可用单位：{spec['units']}；也可给纯数字，按 {spec['symbol']} 理解。例如 {spec['example']}"
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{where} 需要{spec['zh']}，收到 {value!r}。{accepted}")
    if isinstance(value, pint.Quantity):
        if value._REGISTRY is not ureg:
            unit = unit_of_items(dict.items(value._units._d))
            if unit is None or type(value.magnitude) not in (int, float):
                raise ValueError(f"{where} 的单位或数值无法识别（{type(value).__name__}）。{accepted}")
            value = Q_(float(value.magnitude), unit)
        q = value
    elif isinstance(value, numbers.Real):
        q = Q_(float(value), spec["base"])
    elif isinstance(value, str):
        q = _read_text(value, where, accepted, spec)
    else:
        raise ValueError(f"{where} 需要{spec['zh']}，收到 {type(value).__name__} 类型的 {_shown(value)}。{accepted}")
    if not q.check(spec["dim"]):
        raise ValueError(
            f"{where} 需要{spec['zh']}，收到 {_shown(value)}，它是{_describe_dim(q)}。{accepted}"
        )
    mag = q.to(spec["base"]).magnitude
    if isinstance(mag, complex) or not math.isfinite(mag):
        raise ValueError(f"{where} 必须是有限的数，收到 {value!r}。{accepted}")
    if mag < 0:
        raise ValueError(f"{where} 不能为负数，收到 {value!r}。{accepted}")
    return q.to(spec["base"])


def as_bytes(value, *, arg: str = "size", func: str = "") -> pint.Quantity:
    """A data size in bytes. ``"2 GB"`` -> 2e9 B; ``"1 Gb"`` -> 1.25e8 B."""
    return parse(value, "bytes", arg=arg, func=func)


def as_bandwidth(value, *, arg: str = "bandwidth", func: str = "") -> pint.Quantity:
    """A bandwidth in bytes per second. ``"25 Gb/s"`` -> 3.125e9 B/s."""
    return parse(value, "bandwidth", arg=arg, func=func)


def as_time(value, *, arg: str = "time", func: str = "") -> pint.Quantity:
    """A duration in seconds. ``"400 ms"`` -> 0.4 s."""
    return parse(value, "time", arg=arg, func=func)


def as_count(value, *, arg: str, func: str = "", minimum: int = 1) -> int:
    """A whole number >= ``minimum`` (ranks, stages, microbatches, layers ...).

    Accepts ints and integral floats (``4.0``); refuses bools, fractions,
    strings and values below ``minimum`` with a message naming ``arg``.
    """
    where = _where(func, arg)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{where} 需要整数（≥ {minimum}），收到 {value!r}。例如 {arg}=4")
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise ValueError(f"{where} 需要整数（≥ {minimum}），收到 {value!r}。例如 {arg}=4")
    if int(value) != value:
        raise ValueError(f"{where} 需要整数（≥ {minimum}），收到 {value!r}。例如 {arg}=4")
    if int(value) < minimum:
        raise ValueError(f"{where} 至少为 {minimum}，收到 {value!r}。")
    return int(value)


_COUNT_SUFFIX = {"": 1, "K": 1e3, "k": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def as_params(value, *, arg: str = "params", func: str = "") -> float:
    """A parameter count: ``1e9``, ``"1.3e9"``, ``"350M"``, ``"7B"`` (B = billion here)."""
    where = _where(func, arg)
    accepted = '可写 1e9、"1.3e9"、"350M"、"7B"（B 表示十亿个参数）'
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{where} 需要参数个数，收到 {value!r}。{accepted}")
    if isinstance(value, numbers.Real):
        n = float(value)
    elif isinstance(value, str):
        m = re.fullmatch(r"\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([kKMBGT]?)\s*", value)
        if not m:
            raise ValueError(f"{where} 无法解析为参数个数：{value!r}。{accepted}")
        n = float(m.group(1)) * _COUNT_SUFFIX[m.group(2)]
    else:
        raise ValueError(f"{where} 需要参数个数，收到 {type(value).__name__}。{accepted}")
    if not math.isfinite(n) or n <= 0:
        raise ValueError(f"{where} 必须是正的有限数，收到 {value!r}。{accepted}")
    return n


def as_fraction(value, *, arg: str, func: str = "") -> float:
    """A number in [0, 1] (an overlap fraction, say)."""
    where = _where(func, arg)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{where} 需要 0 到 1 之间的数，收到 {value!r}。例如 {arg}=0.5")
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{where} 需要 0 到 1 之间的数，收到 {value!r}。例如 {arg}=0.5")
    return float(value)


def as_positive(value, *, arg: str, func: str = "", allow_zero: bool = False) -> float:
    """A plain positive number (bytes per element, learning rate ...)."""
    where = _where(func, arg)
    ok = (
        not isinstance(value, bool)
        and isinstance(value, numbers.Real)
        and math.isfinite(value)
        and (value >= 0 if allow_zero else value > 0)
    )
    if not ok:
        need = "非负数" if allow_zero else "正数"
        raise ValueError(f"{where} 需要有限的{need}，收到 {value!r}。")
    return float(value)


# ---------------------------------------------------------------- formatting

_DEFAULT_UNIT = {
    "[information]": "GB",
    "[information] / [time]": "GB/s",
}
# Units fmt_auto picks from, smallest first: the first whose rounded value stays under 1000.  Times
# therefore show in ms below 1 s ("120 ms", "0 ms") and in s above ("1.06 s", never "1.06e+03 ms").
# model.js's AUTO is the same table (tests/vectors/calculators.json holds them together).
AUTO_UNITS = {
    "[information]": ("B", "kB", "MB", "GB", "TB", "PB"),
    "[information] / [time]": ("MB/s", "GB/s", "TB/s"),
    "[time]": ("ms", "s", "min", "h"),
}


def _trim(x: float, digits: int) -> str:
    if x == 0:
        return "0"
    # Float noise first: 116.44999999999999 and 116.45000000000002 (one value reached by two unit
    # conversions) both show as 116.5. model.js's trim() does the same, so page and grader agree.
    x = float(f"{x:.12g}")
    s = f"{x:.{digits}g}"
    if "e" in s:
        return s
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return s


def auto_unit(q, digits: int = 3) -> str:
    """The unit :func:`fmt_auto` shows ``q`` in: the first of ``AUTO_UNITS`` whose rounded value is under 1000."""
    units = AUTO_UNITS[str(q.dimensionality)]
    for unit in units:
        if abs(float(_trim(float(q.to(unit).magnitude), digits))) < 1000:
            return unit
    return units[-1]


def fmt_auto(q, digits: int = 3) -> str:
    """A Quantity in the unit its size calls for: ``"500 MB"``, ``"1.06 s"``, ``"0 ms"`` (the calculators' format)."""
    return fmt(q, auto_unit(q, digits), digits)


def fmt(q, unit: str | None = None, digits: int = 3) -> str:
    """Format a Quantity for prose: ``fmt(Q_(3e9, "B"))`` -> ``"3 GB"``.

    Sizes default to decimal GB, bandwidths to GB/s, times to ms below 1 s and
    s above (:func:`auto_unit`); pass ``unit`` to choose ("s", "MB", "GiB" ...).
    ``digits`` are significant digits.
    """
    if not isinstance(q, pint.Quantity):
        return _trim(float(q), digits)
    if unit is None:
        unit = _DEFAULT_UNIT.get(str(q.dimensionality)) or (
            auto_unit(q, digits) if str(q.dimensionality) == "[time]" else None)
    if unit is not None:
        q = q.to(unit)
    return f"{_trim(float(q.magnitude), digits)} {q.units:~}".replace(" / ", "/")


def fmt_count(n: float, digits: int = 3) -> str:
    """A count in Chinese units: ``6.738e9`` -> ``"67.4 亿"``, ``3.5e7`` -> ``"3500 万"``, ``512`` -> ``"512"``."""
    n = float(n)
    for size, name in ((1e12, "万亿"), (1e8, "亿"), (1e4, "万"), (1, "")):
        if abs(n) >= size or size == 1:
            x = n / size
            whole = len(str(int(abs(x))))  # 3500 万, not 3.5e+03 万: every digit before the point is kept
            return f"{_trim(x, max(digits, whole))} {name}".rstrip()
    raise AssertionError("unreachable")


def fmt_percent(x: float, digits: int = 3) -> str:
    """``fmt_percent(0.4545)`` -> ``"45.5%"``."""
    return f"{_trim(100 * float(x), digits)}%"
