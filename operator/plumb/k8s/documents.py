"""The one reader of the YAML and JSON a user gives plumb (a KubeSchedulerConfiguration, a
kubeconfig): text to plain values, as Kubernetes' codecs read it (sigs.k8s.io/yaml over go-yaml
v2, go.yaml.in/yaml/v2; or encoding/json), within bounds, so that a small file, mistaken or
hostile, costs a refusal and never the process.

- Nesting: at most ``MAX_DEPTH`` mappings and sequences deep. go-yaml stops at 10,000; this
  reader recurses once per level on Python's stack (1,000 frames), so it stops at 100. The
  configuration of kube-scheduler's own plugins nests 13 deep at most (``profiles[]
  .pluginConfig[].args.addedAffinity...matchExpressions[].values[]``); only the args of a
  plugin plumb does not know (noted and ignored) could nest deeper.
- Aliases: go-yaml v2's rule with its numbers (decode.go, ``allowedAliasRatio``): once more than
  1,000 values are decoded, more than 100 of them through aliases, the aliased share may be 99%
  up to 400,000 values, sliding down to 10% at 4,000,000. A "billion laughs" file of a few
  hundred bytes is refused after about 10,000 values instead of expanding to 10^9.
- An anchor whose value holds its own alias (``&a [*a]``) is refused, not expanded forever.
- A scalar its tag cannot hold (``!!int abc``, ``!!timestamp 2020-13-45``) is refused in
  go-yaml's words; a plain scalar that only looks like a date (``2020-13-45``) is a string, as
  in go-yaml.

Every refusal is a DocumentError whose message starts ``yaml:`` or ``json:`` as
kube-scheduler's do, with the line where PyYAML knows it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, ClassVar

import yaml  # type: ignore[import-untyped]  # no stubs in the dev dependencies


class DocumentError(ValueError):
    """A document refused: ``field`` the path of the offending value ("" for the whole
    document), ``message`` what is wrong, ``str(error)`` the whole line in kube-scheduler's
    words."""

    def __init__(self, field: str, message: str, text: str | None = None) -> None:
        self.field = field
        self.message = message
        self.text = text if text is not None else (f"{field}: {message}" if field else message)
        super().__init__(self.text)

    def __str__(self) -> str:
        return self.text


def _strict(field: str, message: str) -> DocumentError:
    """A strict decoding error (a duplicate field), worded as kube-scheduler's."""
    return DocumentError(field, message, f"strict decoding error: {message}")


MAX_DEPTH = 100
"""Mappings and sequences one inside another that a file may hold (go-yaml: 10,000)."""

# go-yaml v2 decode.go: the aliased share allowed falls from 99% to 10% over this range of
# values decoded.
_ALIAS_RATIO_LOW = 400_000
_ALIAS_RATIO_HIGH = 4_000_000

_TAG_PREFIX = "tag:yaml.org,2002:"
_STR = _TAG_PREFIX + "str"
_TIMESTAMP = _TAG_PREFIX + "timestamp"


def load(text: str) -> tuple[Any, bool]:
    """The document as plain values and whether it was JSON (kube-scheduler's codec takes a
    document whose first non-space character is '{' as JSON, anything else as YAML); raises
    DocumentError.

    A key twice in one mapping is refused as kube-scheduler's strict decoding does: for JSON
    ``duplicate field "<path>"``, for YAML go-yaml's ``key "<k>" already set in map`` with the
    line.
    """
    if text.lstrip()[:1] == "{":
        return _json(text), True
    return _yaml(text), False


def allowed_alias_ratio(decoded: int) -> float:
    """The share of the values decoded so far that may have come through aliases (go-yaml v2)."""
    if decoded <= _ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= _ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)


def _too_deep(language: str, line: int | None) -> DocumentError:
    where = f"line {line}: " if line is not None else ""
    return DocumentError(
        "",
        f"{language}: {where}exceeded max depth of {MAX_DEPTH} "
        "(mappings and sequences nested in one another; a KubeSchedulerConfiguration needs "
        "fewer than 15)",
    )


class _Pairs(list[tuple[str, Any]]):
    """A JSON object's members in order, duplicates kept, until ``_plain_json`` checks them."""


def _json(text: str) -> Any:
    try:
        raw = json.loads(text, object_pairs_hook=_Pairs)
    except json.JSONDecodeError as error:
        raise DocumentError("", f"json: {error}") from None
    except RecursionError:
        # json's decoder recurses once per level: out of stack is far deeper than MAX_DEPTH.
        raise _too_deep("json", None) from None
    return _plain_json(raw, "", 0)


def _plain_json(value: Any, path: str, depth: int) -> Any:
    if isinstance(value, _Pairs | list):
        depth += 1
        if depth > MAX_DEPTH:
            raise _too_deep("json", None)
    if isinstance(value, _Pairs):
        out: dict[str, Any] = {}
        for key, item in value:
            where = _child(path, key)
            if key in out:
                raise _strict(where, f'duplicate field "{where}"')
            out[key] = _plain_json(item, where, depth)
        return out
    if isinstance(value, list):
        return [_plain_json(item, f"{path}[{i}]", depth) for i, item in enumerate(value)]
    return value


@dataclasses.dataclass(frozen=True, eq=False, slots=True)
class _Alias:
    """An alias (``*name``) as composed. PyYAML's composer hands back the anchored node itself;
    go-yaml's decoder counts what each alias expands to, and so does ``_Decoder``."""

    name: str
    node: Any  # the anchored yaml.Node
    line: int


class _Loader(yaml.SafeLoader):  # type: ignore[misc]  # yaml is untyped
    """PyYAML's safe loader with go-yaml v2's booleans (sigs.k8s.io/yaml: y, Y, n and N are
    booleans there too), its depth limit, and aliases kept visible for ``_Decoder``."""

    bool_values: ClassVar[dict[str, bool]] = {
        **yaml.SafeLoader.bool_values,
        "y": True,
        "n": False,
    }

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    # The scanner stops where go-yaml's does (max_flow_level, max_indents): PyYAML's would scan
    # on, up to 1,024 characters ahead for each '[' that might start a key.
    def fetch_flow_collection_start(self, token_class: Any) -> None:
        if self.flow_level >= MAX_DEPTH:
            raise _too_deep("yaml", _line_of(self.get_mark()))
        super().fetch_flow_collection_start(token_class)

    def add_indent(self, column: int) -> bool:
        if self.indent < column and len(self.indents) >= MAX_DEPTH:
            raise _too_deep("yaml", _line_of(self.get_mark()))
        return bool(super().add_indent(column))

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            return _Alias(event.anchor, super().compose_node(parent, index), _line(event))
        if isinstance(event, yaml.ScalarEvent):
            node = super().compose_node(parent, index)
            if event.tag is None and node.tag == _TIMESTAMP and not _is_timestamp(self, node):
                node.tag = _STR  # go-yaml: a plain value that is no date is a string
            return node
        if not isinstance(event, yaml.CollectionStartEvent):
            return super().compose_node(parent, index)
        # The composer recurses once per level: stop before Python's stack does.
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _too_deep("yaml", _line(event))
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:y|Y|n|N)$"), list("yYnN"))


def _is_timestamp(loader: _Loader, node: Any) -> bool:
    try:
        loader.construct_yaml_timestamp(node)
    except (ValueError, AttributeError):  # AttributeError: PyYAML's regex did not match
        return False
    return True


def _line(thing: Any) -> int:
    return _line_of(thing.start_mark)


def _line_of(mark: Any) -> int:
    return int(mark.line) + 1


def _yaml(text: str) -> Any:
    try:
        loader = _Loader(text)  # its reader refuses control characters at once
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.YAMLError as error:
        raise DocumentError("", f"yaml: {error}") from None
    if node is None:
        return None
    return _Decoder(_Loader("")).value(node, "")


class _Decoder:
    """go-yaml v2's decoding walk over the composed nodes: every value decoded is counted, and
    those reached through an alias, and the walk stops at the first excess (decode.go).

    The composer bounded the depth as written; an alias placed deep that expands to a deep
    value nests deeper still, so the walk bounds the depth as expanded too.
    """

    def __init__(self, loader: _Loader) -> None:
        self._loader = loader  # constructs the scalars
        self._decoded = 1  # go-yaml counts the document node too
        self._aliased = 0
        self._alias_depth = 0
        self._expanding: set[_Alias] = set()
        self._depth = 0

    def value(self, node: Any, path: str) -> Any:
        self._count()
        if isinstance(node, _Alias):
            return self._alias(node, path)
        if not isinstance(node, yaml.CollectionNode):
            return self._scalar(node)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _too_deep("yaml", _line(node))
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path)
            return [self.value(item, f"{path}[{i}]") for i, item in enumerate(node.value)]
        finally:
            self._depth -= 1

    def _count(self) -> None:
        self._decoded += 1
        if self._alias_depth:
            self._aliased += 1
        if (
            self._aliased > 100
            and self._decoded > 1000
            and self._aliased / self._decoded > allowed_alias_ratio(self._decoded)
        ):
            raise DocumentError(
                "",
                "yaml: document contains excessive aliasing "
                f"({self._aliased} of the first {self._decoded} values came through aliases "
                "(*name); write the values out instead)",
            )

    def _alias(self, alias: _Alias, path: str) -> Any:
        if alias in self._expanding:
            raise DocumentError(
                "", f"yaml: line {alias.line}: anchor '{alias.name}' value contains itself"
            )
        self._expanding.add(alias)
        self._alias_depth += 1
        try:
            return self.value(alias.node, path)
        finally:
            self._alias_depth -= 1
            self._expanding.discard(alias)

    def _mapping(self, node: Any, path: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            name = _yaml_key(self.value(key_node, path))
            where = _child(path, name)
            if name in out:
                line = _line(key_node.node if isinstance(key_node, _Alias) else key_node)
                raise DocumentError(
                    where,
                    f'duplicate field "{where}"',
                    "strict decoding error: yaml: unmarshal errors:\n"
                    f'  line {line}: key "{name}" already set in map (at {where})',
                )
            out[name] = self.value(value_node, where)
        return out

    def _scalar(self, node: Any) -> Any:
        try:
            return self._loader.construct_object(node, deep=True)
        except yaml.YAMLError as error:
            raise DocumentError("", f"yaml: {error}") from None
        # PyYAML's constructors fail on a value their tag cannot hold with whatever Python
        # raises (int("abc"): ValueError, a month 13: ValueError, "maybe" as a bool: KeyError).
        except (ValueError, KeyError, AttributeError, TypeError, OverflowError):
            raise DocumentError(
                "",
                f"yaml: line {_line(node)}: cannot decode {_short(self._implicit_tag(node))} "
                f"`{node.value}` as a {_short(node.tag)}",
            ) from None

    def _implicit_tag(self, node: Any) -> str:
        """The tag go-yaml resolves the plain value to, named in its "cannot decode" message."""
        tag = str(self._loader.resolve(yaml.ScalarNode, node.value, (True, False)))
        if tag == _TIMESTAMP and not _is_timestamp(self._loader, node):
            return _STR
        return tag


def _short(tag: str) -> str:
    return "!!" + tag.removeprefix(_TAG_PREFIX) if tag.startswith(_TAG_PREFIX) else tag


def _yaml_key(key: Any) -> str:
    # sigs.k8s.io/yaml turns every mapping key into a JSON string.
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return str(key)


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
