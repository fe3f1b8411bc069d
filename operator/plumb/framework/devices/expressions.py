"""CEL device selectors of Dynamic Resource Allocation, compiled once and evaluated against a
device as kube-scheduler's allocator evaluates them (k8s.io/dynamic-resource-allocation/cel).

The language is Google's CEL (cel-expr-python, the C++ implementation behind a Python binding),
with what Kubernetes adds for selectors: the ``device`` variable (``driver``,
``allowMultipleAllocations``, ``attributes`` and ``capacity`` as maps of domain to map of id to
value, an attribute or capacity published without a domain being in the driver's), the
quantity and semver types and their methods, Kubernetes' list, regex and set functions, the
strings extension, optionals (``.?`` and ``orValue``) and ``cel.bind``. docs/dra.md lists what
is supported and what is not.

Three things kube-scheduler does are rebuilt here, because the library does them otherwise:

- looking up a domain a device does not have gives an empty map, so that
  ``device.attributes["x"].model`` fails on ``model`` and ``has(...)`` and ``.?`` answer
  false/none, while ``"x" in device.attributes`` stays false. The library's maps have no
  default, so each ``device.attributes[K]`` (and ``device.capacity[K]``) is compiled as
  ``cel.bind(__domain, K, __domain in device.attributes ? device.attributes[__domain] : {})``;
  errors and the result type are read on the expression as written. A map reached another way
  (``cel.bind(a, device.attributes, a["x"])``) has no default: such a lookup fails with
  "no such key: x" where kube-scheduler would go on;
- quantities and semantic versions are protobuf messages holding their canonical value (so
  that ``==`` compares values, as Kubernetes' types do), and their methods are Python
  functions;
- errors read as cel-go's: compile errors as ``compilation failed: ERROR: <input>:L:C: ...``,
  a result that is not a bool as ``CEL result of type T could not be converted to bool: ...``,
  runtime errors with cel-go's words (``no such key: model``, ``division by zero``).
  ``SelectorError.sentence`` wraps one as the allocator does (``claim ns/name: selector #0 on
  device driver/pool/device: CEL runtime error: ...``).

Caching. ``compile_selector`` keeps the last compiled expressions (an LRU, as kube-scheduler's
cel.Cache, larger). ``SelectorVerdicts`` keeps each verdict (or its error) of an expression on a
device until the device's slice changes: its entries are grouped by slice name and the group is
dropped as soon as a slice of that name arrives with another resourceVersion (or, for a record
without one, as another object: the group holds its slice, so the identity cannot be reused).
Records are frozen but hold mappings, so they cannot be hashed; the resourceVersion is what the
API server changes whenever a slice's content does.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any, Final

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from plumb.backend.records import draobjects
from plumb.k8s import quantities

__all__ = [
    "DEVICE_FIELDS",
    "CompiledSelector",
    "SelectorError",
    "SelectorVerdicts",
    "compile_selector",
    "evaluate",
]

# The fields of kube-scheduler's "kubernetes.DRADevice" (stored expressions, v1.34 on).
DEVICE_FIELDS: Final = frozenset({"driver", "allowMultipleAllocations", "attributes", "capacity"})
# EnhanceRuntimeError (v1.37): appended to a "no such key" runtime error.
_NO_SUCH_KEY_HINT: Final = (
    ". consider using CEL optional chaining (.? followed by orValue()) or guarding the check "
    "with has() for optional fields"
)
# resource.ErrFormatWrong: what quantity() says of a string that is not one.
_QUANTITY_FORMAT: Final = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
_COMPILED_KEPT: Final = 1024
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class SelectorError(ValueError):
    """A selector that cannot be compiled, or whose evaluation on a device failed.

    ``detail`` is cel-go's text; ``str()`` is what the allocator puts after "selector #i:"
    ("CEL compile error: ..." or "CEL runtime error: ...")."""

    def __init__(self, detail: str, *, at_compile: bool = False) -> None:
        self.detail = detail
        self.at_compile = at_compile
        kind = "compile" if at_compile else "runtime"
        super().__init__(f"CEL {kind} error: {detail}")

    def sentence(self, owner: str, index: int, device: str | None = None) -> str:
        """The allocator's error: ``owner`` is "class NAME" or "claim NAMESPACE/NAME", ``index``
        the selector's position in its list. ``device`` ("driver/pool/device") gives v1.37's
        runtime wording, which names the device and adds a hint to "no such key"; None gives
        v1.34 to v1.36's."""
        if self.at_compile or device is None:
            return f"{owner}: selector #{index}: {self}"
        hint = _NO_SUCH_KEY_HINT if "no such key:" in self.detail else ""
        return f"{owner}: selector #{index} on device {device}: {self}{hint}"


@dataclasses.dataclass(frozen=True, eq=False)
class CompiledSelector:
    """One expression, compiled: ``error`` is set when it cannot be (then it matches nothing and
    every evaluation raises it)."""

    expression: str
    error: SelectorError | None
    program: Any = dataclasses.field(repr=False)


# --- Kubernetes' types: quantity and semver, as messages holding the canonical value --------


def _message_types() -> tuple[descriptor_pool.DescriptorPool, type[Any], type[Any]]:
    proto = descriptor_pb2.FileDescriptorProto(
        name="plumb/dra_selectors.proto", package="kubernetes", syntax="proto3"
    )
    for name in ("Quantity", "Semver"):
        message = proto.message_type.add(name=name)
        message.field.add(
            name="canonical",
            number=1,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    quantity = message_factory.GetMessageClass(pool.FindMessageTypeByName("kubernetes.Quantity"))
    semver = message_factory.GetMessageClass(pool.FindMessageTypeByName("kubernetes.Semver"))
    return pool, quantity, semver


_POOL, _QuantityMessage, _SemverMessage = _message_types()


def _quantity_message(value: Fraction) -> Any:
    return _QuantityMessage(canonical=str(value))


@functools.lru_cache(maxsize=4096)
def _fraction(canonical: str) -> Fraction:
    return Fraction(canonical)


def _q(message: Any) -> Fraction:
    return _fraction(message.canonical)


def _int64(value: int) -> int:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError("integer overflow")
    return value


def _string_to_quantity(text: str) -> Any:
    return _QuantityMessage(canonical=_quantity_canonical(text))


@functools.lru_cache(maxsize=4096)
def _quantity_canonical(text: str) -> str:
    try:
        return str(quantities.parse(text))
    except quantities.QuantityError:
        raise ValueError(_QUANTITY_FORMAT) from None


def _is_quantity(text: str) -> bool:
    try:
        quantities.parse(text)
    except quantities.QuantityError:
        return False
    return True


def _quantity_as_integer(message: Any) -> int:
    value = _q(message)
    if value.denominator != 1 or not _INT64_MIN <= value.numerator <= _INT64_MAX:
        raise ValueError("cannot convert value to integer")
    return value.numerator


def _quantity_is_integer(message: Any) -> bool:
    value = _q(message)
    return value.denominator == 1 and _INT64_MIN <= value.numerator <= _INT64_MAX


def _compare(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


def _ordering(a: Any, b: Any) -> int:
    """compareTo of two quantities or of two versions."""
    if a.DESCRIPTOR.name == "Quantity":
        return _compare(_q(a), _q(b))
    return _compare(_v(a).key(), _v(b).key())


@dataclasses.dataclass(frozen=True, slots=True)
class _Version:
    """A semantic version as blang/semver/v4 reads it (build metadata kept apart, ignored by
    comparisons)."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...]

    def canonical(self) -> str:
        core = f"{self.major}.{self.minor}.{self.patch}"
        return core + ("-" + ".".join(str(p) for p in self.pre) if self.pre else "")

    def key(self) -> tuple[Any, ...]:
        # A release sorts after its prereleases; numeric identifiers before alphanumeric ones.
        pre = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, not self.pre, pre)


_NUMBERS = re.compile(r"[0-9]+")
_ALPHANUM = re.compile(r"[0-9A-Za-z-]+")


def _number(part: str, what: str) -> int:
    if not _NUMBERS.fullmatch(part):
        raise ValueError(f"Invalid character(s) found in {what} number {_go_quote(part)}")
    if len(part) > 1 and part[0] == "0":
        raise ValueError(
            f"{what.capitalize()} number must not contain leading zeroes {_go_quote(part)}"
        )
    return int(part)


@functools.lru_cache(maxsize=4096)
def _parse_version(text: str) -> _Version:
    """blang/semver/v4's Parse, with its error texts."""
    if not text:
        raise ValueError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise ValueError("No Major.Minor.Patch elements found")
    major, minor = _number(parts[0], "major"), _number(parts[1], "minor")
    rest, build = parts[2], ""
    if "+" in rest:
        rest, build = rest.split("+", 1)
    pre_text = None
    if "-" in rest:
        rest, pre_text = rest.split("-", 1)
    patch = _number(rest, "patch")
    pre: list[int | str] = []
    for identifier in pre_text.split(".") if pre_text is not None else ():
        if not identifier:
            raise ValueError("Prerelease is empty")
        if _NUMBERS.fullmatch(identifier):
            if len(identifier) > 1 and identifier[0] == "0":
                raise ValueError(
                    "Numeric PreRelease version must not contain leading zeroes "
                    + _go_quote(identifier)
                )
            pre.append(int(identifier))
        elif _ALPHANUM.fullmatch(identifier):
            pre.append(identifier)
        else:
            raise ValueError(f"Invalid character(s) found in prerelease {_go_quote(identifier)}")
    if build or "+" in parts[2]:
        for identifier in build.split("."):
            if not identifier:
                raise ValueError("Build meta data is empty")
            if not _ALPHANUM.fullmatch(identifier):
                raise ValueError(
                    f"Invalid character(s) found in build meta data {_go_quote(identifier)}"
                )
    return _Version(major, minor, patch, tuple(pre))


def _normalized(text: str) -> str:
    """Kubernetes' normalizeAndParse before Parse: no "v" prefix, no leading zeros, missing
    minor and patch added."""
    parts = text.removeprefix("v").split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or not part[0].isdigit():
                part = "0" + part
            parts[i] = part
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise ValueError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def _semver_message(text: str, normalize: bool = False) -> Any:
    version = _parse_version(_normalized(text) if normalize else text)
    return _SemverMessage(canonical=version.canonical())


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        _parse_version(_normalized(text) if normalize else text)
    except ValueError:
        return False
    return True


def _v(message: Any) -> _Version:
    return _parse_version(message.canonical)


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --- Kubernetes' lists, regex and sets libraries, and cel-go's lists extension ---------------


def _ordered(values: Sequence[Any], name: str) -> Sequence[Any]:
    if not values:
        raise ValueError(f"{name} called on empty list")
    return values


def _sum(values: Sequence[Any]) -> Any:
    total = sum(values)
    return _int64(total) if isinstance(total, int) else total


def _equal(a: Any, b: Any) -> bool:
    # CEL's heterogeneous equality: a bool is never a number.
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return bool(a == b)


def _includes(target: Any, item: Any) -> bool:
    if isinstance(target, list):
        return any(_equal(v, item) for v in target)
    return _equal(target, item)


def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as error:
        raise ValueError(f"Illegal regex: {error}") from None


def _find(text: str, pattern: str) -> str:
    found = _regex(pattern).search(text)
    return found.group(0) if found else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    matches = [m.group(0) for m in _regex(pattern).finditer(text)]
    return matches if limit < 0 else matches[:limit]


def _distinct(values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if not any(_equal(v, seen) for seen in out):
            out.append(v)
    return out


def _flatten(values: Sequence[Any], depth: int = 1) -> list[Any]:
    if depth < 0:
        raise ValueError("level must be non-negative")
    out: list[Any] = []
    for v in values:
        if isinstance(v, list) and depth > 0:
            out.extend(_flatten(v, depth - 1))
        else:
            out.append(v)
    return out


def _slice(values: Sequence[Any], start: int, end: int) -> list[Any]:
    if start < 0 or end < 0:
        raise ValueError(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        raise ValueError(
            f"cannot slice({start}, {end}), start index must be less than or equal to end index"
        )
    if len(values) < end:
        raise ValueError(f"cannot slice({start}, {end}), list is length {len(values)}")
    return list(values[start:end])


def _sorted(values: Sequence[Any]) -> list[Any]:
    try:
        return sorted(values)
    except TypeError:
        raise ValueError("list elements must have the same type") from None


def _sets_contains(values: Sequence[Any], wanted: Sequence[Any]) -> bool:
    return all(any(_equal(w, v) for v in values) for w in wanted)


def _sets_intersects(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return any(any(_equal(x, y) for y in b) for x in a)


# --- The environment ------------------------------------------------------------------------

_T = cel.Type


def _fn(
    name: str, *overloads: tuple[str, Sequence[Any], Any, bool, Callable[..., Any] | None]
) -> Any:
    """A function's declaration: (overload id, parameters, result, member?, implementation or
    None when an earlier overload's serves it)."""
    declared = []
    for oid, params, ret, member, impl in overloads:
        options: dict[str, Any] = {"return_type": ret, "parameters": list(params)}
        if impl is not None:
            options["impl"] = impl
        declared.append(cel.Overload(oid, is_member=member, **options))
    return cel.FunctionDecl(name, declared)


@functools.cache
def _environment() -> Any:
    quantity, semver = _T("kubernetes.Quantity"), _T("kubernetes.Semver")
    dyn_list = _T.List(_T.DYN)
    i, b, s, d = _T.INT, _T.BOOL, _T.STRING, _T.DYN
    functions = [
        # Kubernetes' quantity library.
        _fn("quantity", ("string_to_quantity", [s], quantity, False, _string_to_quantity)),
        _fn("isQuantity", ("is_quantity_string", [s], b, False, _is_quantity)),
        _fn("sign", ("quantity_sign", [quantity], i, False, lambda q: _compare(_q(q), 0))),
        _fn(
            "asApproximateFloat",
            ("quantity_get_float", [quantity], _T.DOUBLE, True, lambda q: float(_q(q))),
        ),
        _fn("asInteger", ("quantity_get_int", [quantity], i, True, _quantity_as_integer)),
        _fn("isInteger", ("quantity_is_integer", [quantity], b, True, _quantity_is_integer)),
        _fn(
            "add",
            (
                "quantity_add",
                [quantity, quantity],
                quantity,
                True,
                lambda a, c: _quantity_message(_q(a) + _q(c)),
            ),
            (
                "quantity_add_int",
                [quantity, i],
                quantity,
                True,
                lambda a, c: _quantity_message(_q(a) + c),
            ),
        ),
        _fn(
            "sub",
            (
                "quantity_sub",
                [quantity, quantity],
                quantity,
                True,
                lambda a, c: _quantity_message(_q(a) - _q(c)),
            ),
            (
                "quantity_sub_int",
                [quantity, i],
                quantity,
                True,
                lambda a, c: _quantity_message(_q(a) - c),
            ),
        ),
        # Both types' comparisons. The library dispatches on the kind of value (a message for
        # both), so one implementation serves the two overloads.
        _fn(
            "isGreaterThan",
            (
                "quantity_is_greater_than",
                [quantity, quantity],
                b,
                True,
                lambda a, c: _ordering(a, c) > 0,
            ),
            ("semver_is_greater_than", [semver, semver], b, True, None),
        ),
        _fn(
            "isLessThan",
            (
                "quantity_is_less_than",
                [quantity, quantity],
                b,
                True,
                lambda a, c: _ordering(a, c) < 0,
            ),
            ("semver_is_less_than", [semver, semver], b, True, None),
        ),
        _fn(
            "compareTo",
            ("quantity_compare_to", [quantity, quantity], i, True, _ordering),
            ("semver_compare_to", [semver, semver], i, True, None),
        ),
        # Kubernetes' semver library (version 1: the normalizing overloads).
        _fn(
            "semver",
            ("string_to_semver", [s], semver, False, _semver_message),
            ("string_bool_to_semver", [s, b], semver, False, _semver_message),
        ),
        _fn(
            "isSemver",
            ("is_semver_string", [s], b, False, _is_semver),
            ("is_semver_string_bool", [s, b], b, False, _is_semver),
        ),
        _fn("major", ("semver_major", [semver], i, True, lambda v: _v(v).major)),
        _fn("minor", ("semver_minor", [semver], i, True, lambda v: _v(v).minor)),
        _fn("patch", ("semver_patch", [semver], i, True, lambda v: _v(v).patch)),
        # Kubernetes' regex library (Python's re; cel-go uses RE2).
        _fn("find", ("string_find_string", [s, s], s, True, _find)),
        _fn(
            "findAll",
            ("string_find_all_string", [s, s], _T.List(s), True, _find_all),
            ("string_find_all_string_int", [s, s, i], _T.List(s), True, _find_all),
        ),
        # Kubernetes' lists library (and includes, v1.37's version 1).
        _fn(
            "isSorted",
            (
                "list_is_sorted",
                [dyn_list],
                b,
                True,
                lambda v: all(x <= y for x, y in itertools.pairwise(v)),
            ),
        ),
        _fn("sum", ("list_sum", [dyn_list], d, True, _sum)),
        _fn("min", ("list_min", [dyn_list], d, True, lambda v: min(_ordered(v, "min")))),
        _fn("max", ("list_max", [dyn_list], d, True, lambda v: max(_ordered(v, "max")))),
        # includes(dyn, dyn): the library dispatches a dyn parameter on no kind, so one
        # overload per kind of element, on a list or on a scalar.
        _fn(
            "includes",
            *(
                (
                    f"{where}_includes_{kind}",
                    [_T.List(d) if where == "list" else t, t],
                    b,
                    True,
                    _includes,
                )
                for kind, t in (
                    ("int", i),
                    ("double", _T.DOUBLE),
                    ("string", s),
                    ("bool", b),
                    ("semver", semver),
                )
                for where in ("list", kind)
            ),
        ),
        # cel-go's lists extension (version 3), without sortBy and first/last (macro, optional).
        _fn("distinct", ("list_distinct", [dyn_list], dyn_list, True, _distinct)),
        _fn(
            "flatten",
            ("list_flatten", [dyn_list], dyn_list, True, _flatten),
            ("list_flatten_int", [dyn_list, i], dyn_list, True, _flatten),
        ),
        _fn("slice", ("list_slice", [dyn_list, i, i], dyn_list, True, _slice)),
        _fn("sort", ("list_sort", [dyn_list], dyn_list, True, _sorted)),
        _fn("lists.range", ("lists_range", [i], _T.List(i), False, lambda n: list(range(n)))),
        # cel-go's sets extension.
        _fn(
            "sets.contains",
            ("list_sets_contains_list", [dyn_list, dyn_list], b, False, _sets_contains),
        ),
        _fn(
            "sets.equivalent",
            (
                "list_sets_equivalent_list",
                [dyn_list, dyn_list],
                b,
                False,
                lambda a, c: _sets_contains(a, c) and _sets_contains(c, a),
            ),
        ),
        _fn(
            "sets.intersects",
            ("list_sets_intersects_list", [dyn_list, dyn_list], b, False, _sets_intersects),
        ),
    ]
    return cel.NewEnv(
        _POOL,
        variables={"device": _T.Map(s, d)},
        extensions=[
            ext_strings.ExtStrings(),
            ext_optional.ExtOptional(),
            ext_bindings.ExtBindings(),
        ],
        functions=functions,
    )


# --- Compiling -------------------------------------------------------------------------------

_STRING_LITERAL = re.compile(
    r"""(?:[rR][bB]?|[bB][rR]?)?"""
    r'''(?:"""(?P<t2>.*?)"""|\'\'\'(?P<t1>.*?)\'\'\'|"(?P<d>(?:[^"\\\n]|\\.)*)"|'(?P<s>(?:[^'\\\n]|\\.)*)')''',
    re.DOTALL,
)
_DEVICE_FIELD = re.compile(r"(?<![\w.])device\s*(\.\??)\s*([A-Za-z_][A-Za-z0-9_]*)")
_DOMAIN_LOOKUP = re.compile(r"(?<![\w.])device\s*\.\s*(attributes|capacity)\s*\[")
_STATUS = re.compile(r"^[A-Z_]+: ")
_STATUS_SUFFIX = re.compile(r"\s*\[[A-Z_]+\]\s*$")


@functools.lru_cache(maxsize=_COMPILED_KEPT)
def compile_selector(expression: str) -> CompiledSelector:
    """The expression compiled as kube-scheduler compiles a stored selector; a compile error is
    kept on the result (``error``), never raised."""
    problem = _undefined_field(expression)
    if problem:
        return CompiledSelector(expression, SelectorError(problem, at_compile=True), None)
    environment = _environment()
    try:
        checked = environment.compile(expression)
    except RuntimeError as error:
        detail = _STATUS_SUFFIX.sub("", _STATUS.sub("", str(error), count=1))
        return CompiledSelector(
            expression, SelectorError("compilation failed: " + detail, at_compile=True), None
        )
    result = _go_type_name(checked.return_type().name())
    if result not in ("bool", "dyn"):
        failure = SelectorError(
            f"must evaluate to bool or the unknown type, not {result}", at_compile=True
        )
        return CompiledSelector(expression, failure, None)
    # What runs is the expression whose domain lookups default to an empty map; errors and
    # types were read on the expression as written.
    defaulted = _default_domains(expression)
    program = checked if defaulted == expression else environment.compile(defaulted)
    return CompiledSelector(expression, None, program)


def _blank_strings(expression: str) -> str:
    """The expression with its string literals blanked (same length), for scanning."""
    return _STRING_LITERAL.sub(lambda m: " " * len(m.group(0)), expression)


def _default_domains(expression: str) -> str:
    """Each ``device.attributes[K]`` and ``device.capacity[K]`` written as a lookup that gives
    an empty map for a domain the device lacks, as kube-scheduler's map does:
    ``cel.bind(__domain, K, __domain in M ? M[__domain] : {})``; ``[?K]`` (which finds every
    domain there) as ``optional.of(...)`` of the same."""
    blanked = _blank_strings(expression)
    out, done = [], 0
    for found in _DOMAIN_LOOKUP.finditer(blanked):
        if found.start() < done:
            continue  # inside a key already taken whole (handled by the recursion below)
        opening = found.end() - 1
        depth, closing = 0, -1
        for at in range(opening, len(blanked)):
            depth += {"[": 1, "]": -1}.get(blanked[at], 0)
            if depth == 0:
                closing = at
                break
        if closing < 0:
            continue  # unbalanced: the compiler has already said so
        mapping = f"device.{found.group(1)}"
        key = expression[opening + 1 : closing]
        optional = key.lstrip().startswith("?")
        if optional:
            key = key.lstrip()[1:]
        lookup = (
            f"cel.bind(__domain, {_default_domains(key)}, "
            f"__domain in {mapping} ? {mapping}[__domain] : {{}})"
        )
        out += [expression[done : found.start()], f"optional.of({lookup})" if optional else lookup]
        done = closing + 1
    return "".join([*out, expression[done:]])


def _undefined_field(expression: str) -> str:
    """cel-go's checker error for ``device.<not a field>``: the library sees ``device`` as a map
    and would only fail at run time."""
    blanked = _blank_strings(expression)
    for found in _DEVICE_FIELD.finditer(blanked):
        if found.group(2) in DEVICE_FIELDS:
            continue
        offset = found.start(1)
        line = expression.count("\n", 0, offset) + 1
        start = expression.rfind("\n", 0, offset) + 1
        column = offset - start
        source = expression.splitlines()[line - 1] if expression else ""
        return (
            f"compilation failed: ERROR: <input>:{line}:{column + 1}: "
            f"undefined field '{found.group(2)}'\n | {source}\n | {'.' * column}^"
        )
    return ""


_GO_TYPE_NAMES: Final = {
    "NULL": "null_type",
    "TIMESTAMP": "google.protobuf.Timestamp",
    "DURATION": "google.protobuf.Duration",
    "optional_type": "optional_type",
}


def _go_type_name(name: str) -> str:
    """cel-go's spelling of a type the library names: "LIST<STRING>" is "list(string)"."""

    def one(token: re.Match[str]) -> str:
        word = token.group(0)
        return _GO_TYPE_NAMES.get(word, word.lower() if word.isupper() else word)

    spelled = re.sub(r"[A-Za-z_][A-Za-z0-9_.]*", one, name)
    return spelled.replace("<", "(").replace(">", ")")


# --- Evaluating ------------------------------------------------------------------------------


def _split(name: str, driver: str) -> tuple[str, str]:
    """parseQualifiedName: the domain before the first "/", else the driver's."""
    domain, slash, ident = name.partition("/")
    return (domain, ident) if slash else (driver, name)


def _attribute(name: str, value: draobjects.AttributeValue) -> Any:
    if isinstance(value, draobjects.SemVer):
        return _version_attribute(name, value)
    if isinstance(value, tuple):
        return [
            _version_attribute(name, v) if isinstance(v, draobjects.SemVer) else v for v in value
        ]
    return value


def _version_attribute(name: str, value: draobjects.SemVer) -> Any:
    try:
        return _semver_message(value.text)
    except ValueError as error:
        raise SelectorError(f"attribute {name}: parse semantic version: {error}") from None


def _device_data(driver: str, device: draobjects.Device) -> dict[str, Any]:
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in device.attributes.items():
        domain, ident = _split(name, driver)
        attributes.setdefault(domain, {})[ident] = _attribute(name, value)
    capacity: dict[str, dict[str, Any]] = {}
    for name, amount in device.capacity.items():
        domain, ident = _split(name, driver)
        capacity.setdefault(domain, {})[ident] = _quantity_message(amount.value.value)
    return {
        "driver": driver,
        "allowMultipleAllocations": device.allow_multiple_allocations,
        "attributes": attributes,
        "capacity": capacity,
    }


_KEY_NOT_FOUND = re.compile(r'^Key not found in map : "?(.*?)"?$', re.DOTALL)
_INDEX = re.compile(r"^Index error: index=(-?\d+) size=(\d+)$")
_RUNTIME_WORDS: Final = {"divide by zero": "division by zero"}


def _runtime_detail(text: str) -> str:
    """cel-go's words for the library's runtime error."""
    text = _STATUS.sub("", text, count=1)
    found = _KEY_NOT_FOUND.match(text)
    if found:
        return f"no such key: {found.group(1)}"
    found = _INDEX.match(text)
    if found:
        return f"index '{found.group(1)}' out of range in list size '{found.group(2)}'"
    if text.startswith("No matching overloads found"):
        return "no such overload"
    return _RUNTIME_WORDS.get(text, text)


def _run(selector: CompiledSelector, data: Mapping[str, Any]) -> tuple[bool | None, str]:
    """(verdict, "") or (None, the library's error)."""
    try:
        result = selector.program.eval(data={"device": data})
    except RuntimeError as error:  # a value the binding cannot carry
        return None, str(error)
    kind = result.type().name()
    if kind == "BOOL":
        return bool(result.value()), ""
    if kind == "ERROR":
        return None, str(result.value())
    name = _go_type_name(kind)
    name = name.split("(", 1)[0]
    raise SelectorError(
        f"CEL result of type {name} could not be converted to bool: "
        f"type conversion error from '{name}' to 'bool'"
    )


def evaluate(selector: CompiledSelector, driver: str, device: draobjects.Device) -> bool:
    """Whether the device (of a slice of ``driver``) matches; raises SelectorError with
    kube-scheduler's words when the selector does not compile or its evaluation fails."""
    if selector.error is not None:
        raise selector.error
    return _evaluate(selector, _device_data(driver, device))


def _evaluate(selector: CompiledSelector, data: Mapping[str, Any]) -> bool:
    if selector.error is not None:
        raise selector.error
    verdict, problem = _run(selector, data)
    if verdict is None:
        raise SelectorError(_runtime_detail(problem))
    return verdict


# --- Verdicts kept until the slice changes ---------------------------------------------------


@dataclasses.dataclass(eq=False, slots=True)
class _SliceVerdicts:
    slice: draobjects.ResourceSlice
    devices: dict[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    verdicts: dict[tuple[str, str], bool | SelectorError] = dataclasses.field(default_factory=dict)


class SelectorVerdicts:
    """Each expression's verdict on each device, evaluated once and kept until the device's
    slice changes (another resourceVersion) or is forgotten (deleted)."""

    def __init__(self) -> None:
        self._slices: dict[str, _SliceVerdicts] = {}
        self.evaluations = 0

    def matches(
        self, expression: str, slice_: draobjects.ResourceSlice, device: draobjects.Device
    ) -> bool:
        """Whether the device of that slice matches the expression; raises SelectorError (the
        same one each time) when it cannot say."""
        kept = self._slices.get(slice_.name)
        if kept is None or not _same(kept.slice, slice_):
            kept = self._slices[slice_.name] = _SliceVerdicts(slice_)
        key = (expression, device.name)
        verdict = kept.verdicts.get(key)
        if verdict is None:
            self.evaluations += 1
            verdict = self._evaluate(expression, kept, device)
            kept.verdicts[key] = verdict
        if isinstance(verdict, SelectorError):
            raise verdict
        return verdict

    def _evaluate(
        self, expression: str, kept: _SliceVerdicts, device: draobjects.Device
    ) -> bool | SelectorError:
        driver = kept.slice.driver
        try:
            data = kept.devices.get(device.name)
            if data is None:
                data = kept.devices[device.name] = _device_data(driver, device)
            return _evaluate(compile_selector(expression), data)
        except SelectorError as error:
            return error

    def forget(self, slice_name: str) -> None:
        """Drop what was kept for a slice (deleted)."""
        self._slices.pop(slice_name, None)

    def __len__(self) -> int:
        return sum(len(kept.verdicts) for kept in self._slices.values())


def _same(kept: draobjects.ResourceSlice, slice_: draobjects.ResourceSlice) -> bool:
    if kept is slice_:
        return True
    return bool(slice_.resource_version) and kept.resource_version == slice_.resource_version
