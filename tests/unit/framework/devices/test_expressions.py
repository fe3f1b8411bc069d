"""DRA's CEL selectors as kube-scheduler evaluates them: the cases and verdicts of
k8s.io/dynamic-resource-allocation@v0.37.2/cel/compile_test.go (same expressions, same
verdicts, same error words), the allocator's sentences (dynamicresources_test.go), and the cache
of verdicts that is kept until a slice changes."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from types import MappingProxyType

import pytest

from plumb.backend.records import draobjects
from plumb.framework.devices import expressions
from plumb.k8s import quantities

DRIVER = "dra.example.com"


def device(
    attributes: Mapping[str, draobjects.AttributeValue] | None = None,
    capacity: Mapping[str, str] | None = None,
    *,
    name: str = "instance-1",
    multiple: bool = False,
) -> draobjects.Device:
    return draobjects.Device(
        name=name,
        attributes=MappingProxyType(dict(attributes or {})),
        capacity=MappingProxyType(
            {
                k: draobjects.Capacity(draobjects.Quantity(quantities.parse(v), v))
                for k, v in (capacity or {}).items()
            }
        ),
        allow_multiple_allocations=multiple,
    )


def verdict(expression: str, dev: draobjects.Device | None = None, driver: str = DRIVER) -> bool:
    return expressions.evaluate(expressions.compile_selector(expression), driver, dev or device())


def failure(expression: str, dev: draobjects.Device | None = None, driver: str = DRIVER) -> str:
    with pytest.raises(expressions.SelectorError) as caught:
        verdict(expression, dev, driver)
    return str(caught.value)


# compile_test.go's cases that hold for stored expressions (what the scheduler compiles).
MATCHES = [
    ("true", device(), "", True),
    ("false", device(), "", False),
    ('"no-such-domain" in device.attributes', device(), DRIVER, False),
    (
        '"dra.example.com" in device.attributes',
        device({"dra.example.com/something": True}),
        "",
        True,
    ),
    ('device.driver == ""', device(), "", True),
    ('device.driver == "dra.example.com"', device(), DRIVER, True),
    ('device.attributes["dra.example.com"].name', device({"name": True}), DRIVER, True),
    ('device.attributes["dra.example.com"]["name"]', device({"name": True}), DRIVER, True),
    (
        'cel.bind(dra, device.attributes["dra.example.com"], dra.name)',
        device({"name": True}),
        DRIVER,
        True,
    ),
    (
        'device.attributes["other.example.com"].name',
        device({"other.example.com/name": True}),
        DRIVER,
        True,
    ),
    ('device.attributes["dra.example.com"].name > 0', device({"name": 1}), DRIVER, True),
    ('device.attributes["dra.example.com"].name == "fish"', device({"name": "fish"}), DRIVER, True),
    (
        'device.attributes["dra.example.com"].names.size() == 2',
        device({"names": (True, False)}),
        DRIVER,
        True,
    ),
    (
        'device.attributes["dra.example.com"].names.size() == 2',
        device({"names": (1, 2)}),
        DRIVER,
        True,
    ),
    (
        'device.attributes["dra.example.com"].names.size() == 2',
        device({"names": (draobjects.SemVer("1.0.0"), draobjects.SemVer("2.0.0"))}),
        DRIVER,
        True,
    ),
    (
        'device.attributes["dra.example.com"].names.exists(x, x > 0)',
        device({"names": (1, 2)}),
        DRIVER,
        True,
    ),
    (
        'device.attributes["dra.example.com"].names.all(x, x != "")',
        device({"names": ("fish", "bird")}),
        DRIVER,
        True,
    ),
    (
        'device.attributes["dra.example.com"].names.all(x, x.isGreaterThan(semver("0.0.1")))',
        device({"names": (draobjects.SemVer("1.0.0"), draobjects.SemVer("2.0.0"))}),
        DRIVER,
        True,
    ),
    (
        'device.attributes["dra.example.com"].name.includes("fish")',
        device({"name": ("fish", "bird")}),
        DRIVER,
        True,
    ),
    (
        'device.attributes["dra.example.com"].name.includes(true)',
        device({"name": False}),
        DRIVER,
        False,
    ),
    ('device.attributes["dra.example.com"].name.includes(1)', device({"name": 2}), DRIVER, False),
    (
        'device.attributes["dra.example.com"].name.includes(3)',
        device({"name": (1, 2)}),
        DRIVER,
        False,
    ),
    (
        'device.attributes["dra.example.com"].name.includes(semver("1.0.0"))',
        device({"name": draobjects.SemVer("1.0.0")}),
        DRIVER,
        True,
    ),
    (
        'device.attributes["dra.example.com"].name.includes(semver("3.0.0"))',
        device({"name": (draobjects.SemVer("1.0.0"), draobjects.SemVer("2.0.0"))}),
        DRIVER,
        False,
    ),
    ('1 in device.attributes["dra.example.com"].names', device({"names": (1, 2, 3)}), DRIVER, True),
    (
        'device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))',
        device({"name": draobjects.SemVer("1.0.0")}),
        DRIVER,
        True,
    ),
    (
        'device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true)) '
        '&& isSemver("v1.0.0", true)',
        device({"name": draobjects.SemVer("1.0.0")}),
        DRIVER,
        True,
    ),
    (
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        device(capacity={"name": "1Mi"}),
        DRIVER,
        True,
    ),
    (
        '"name" in device.capacity["dra.example.com"] && '
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        device(capacity={"name": "1Mi"}),
        DRIVER,
        True,
    ),
    (
        '!("name" in device.capacity["dra.example.com"]) || '
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        device(),
        "",
        True,
    ),
    (
        'device.attributes["dra.example.com"].a && device.attributes["dra.example.com"].b && '
        'device.attributes["dra.example.com"].c',
        device({"a": True, "b": True, "c": True}),
        DRIVER,
        True,
    ),
    (
        'device.attributes.exists_one(x, x == "dra.example.com")',
        device({"services": "some_example_value"}),
        DRIVER,
        True,
    ),
    (
        'device.attributes["dra.example.com"].exists_one(x, x == "services")',
        device({"services": "some_example_value"}),
        DRIVER,
        True,
    ),
    (
        'device.attributes["dra.example.com"].services.split("example").size() >= 2',
        device({"services": "some_example_value"}),
        DRIVER,
        True,
    ),
    (
        'device.attributes["dra.example.com"].services.matches("[^a]?sym")',
        device({"services": "asymetric"}),
        DRIVER,
        True,
    ),
    (
        'device.capacity.exists_one(x, x == "dra.example.com")',
        device(capacity={"memory": "1Mi"}),
        DRIVER,
        True,
    ),
    (
        'device.capacity["dra.example.com"].exists_one(x, x == "memory")',
        device(capacity={"memory": "1Mi"}),
        DRIVER,
        True,
    ),
    ("device.allowMultipleAllocations == true", device(multiple=True), DRIVER, True),
    ("device.allowMultipleAllocations == false", device(), DRIVER, True),
]

ALL = """
device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"].bool &&
device.attributes["dra.example.com"].int > 0 &&
device.attributes["dra.example.com"].string == "fish" &&
device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1")) &&
device.capacity["dra.example.com"]["quantity"].isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"]["bool"] &&
device.attributes["dra.example.com"]["int"] > 0 &&
device.attributes["dra.example.com"]["string"] == "fish" &&
device.attributes["dra.example.com"]["version"].isGreaterThan(semver("0.0.1"))
"""


@pytest.mark.parametrize(("expression", "dev", "driver", "expected"), MATCHES)
def test_kube_scheduler_verdicts(
    expression: str, dev: draobjects.Device, driver: str, expected: bool
) -> None:
    assert verdict(expression, dev, driver) is expected


def test_all_kinds_at_once() -> None:
    dev = device(
        {"bool": True, "int": 1, "string": "fish", "version": draobjects.SemVer("1.0.0")},
        {"quantity": "1Mi"},
    )
    assert verdict(ALL, dev)


# --- errors, in cel-go's words ---------------------------------------------------------------


def test_syntax_error_is_a_compile_error_kept_on_the_result() -> None:
    compiled = expressions.compile_selector("?!")
    assert compiled.error is not None
    assert compiled.error.at_compile
    assert str(compiled.error).startswith(
        "CEL compile error: compilation failed: ERROR: <input>:1:1: Syntax error:"
    )
    assert " | ?!\n | ^" in str(compiled.error)
    with pytest.raises(expressions.SelectorError) as caught:
        expressions.evaluate(compiled, DRIVER, device())
    assert caught.value is compiled.error


def test_result_type_checked_at_compile_time() -> None:
    assert failure("1") == ("CEL compile error: must evaluate to bool or the unknown type, not int")
    assert failure('"fish"').endswith("not string")
    assert failure('["a"]').endswith("not list(string)")


def test_undefined_device_field_is_a_compile_error() -> None:
    assert failure("device.allowMultipleAllocation == false") == (
        "CEL compile error: compilation failed: ERROR: <input>:1:7: "
        "undefined field 'allowMultipleAllocation'\n"
        " | device.allowMultipleAllocation == false\n"
        " | ......^"
    )
    # A string that reads like a field is no field.
    assert verdict('device.driver != "device.nope"', device(), DRIVER)


@pytest.mark.parametrize(
    "expression",
    [
        'device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))',
        'device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))',
    ],
)
def test_missing_domain_is_an_empty_map(expression: str) -> None:
    assert failure(expression) == "CEL runtime error: no such key: noSuchAttr"


def test_missing_attribute_of_a_present_domain() -> None:
    dev = device({"model": "a100"})
    assert failure('device.attributes["dra.example.com"].memory > 1', dev) == (
        "CEL runtime error: no such key: memory"
    )


def test_guards_answer_on_missing_attributes_and_domains() -> None:
    dev = device({"model": "a100"})
    assert not verdict('has(device.attributes["gpu.example.com"].model)', dev)
    assert not verdict('has(device.attributes["dra.example.com"].memory)', dev)
    assert verdict('device.attributes["gpu.example.com"].?model.orValue("none") == "none"', dev)
    assert verdict('device.attributes["dra.example.com"].?model.orValue("none") == "a100"', dev)
    # An optional lookup of a domain finds it, empty, as kube-scheduler's map does.
    assert verdict('device.attributes[?"gpu.example.com"].hasValue()', dev)
    assert verdict('device.attributes[?"gpu.example.com"].?model.orValue(1) == 1', dev)
    # A computed domain, and a lookup inside a key.
    assert verdict('device.attributes[device.driver].model == "a100"', dev)
    assert not verdict('has(device.attributes[device.attributes["dra.example.com"].model].x)', dev)
    # A missing domain is not "in" the attributes even though a lookup of it gives a map.
    assert verdict(
        '!("gpu.example.com" in device.attributes) && '
        '!has(device.attributes["gpu.example.com"].model)',
        dev,
    )


def test_result_that_is_not_a_bool() -> None:
    dev = device({"names": ("fish", "bird")})
    assert failure('device.attributes["dra.example.com"].names', dev) == (
        "CEL runtime error: CEL result of type list could not be converted to bool: "
        "type conversion error from 'list' to 'bool'"
    )
    dev = device({"model": "a100"})
    assert "CEL result of type string could not be converted to bool" in failure(
        'device.attributes["dra.example.com"].model', dev
    )


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ('device.attributes["dra.example.com"].n / 0 == 1', "division by zero"),
        ('device.attributes["dra.example.com"].n % 0 == 1', "modulus by zero"),
        ('device.attributes["dra.example.com"].n + 9223372036854775807 > 0', "integer overflow"),
        ('device.attributes["dra.example.com"].n + "a" == "1a"', "no such overload"),
        ('quantity("1,5Gi").isGreaterThan(quantity("1"))', "quantities must match the regular"),
        ('quantity("1.5").asInteger() == 1', "cannot convert value to integer"),
        ('semver("1.0").major() == 1', "No Major.Minor.Patch elements found"),
        ('semver("1.01.0").major() == 1', 'Minor number must not contain leading zeroes "01"'),
    ],
)
def test_runtime_errors(expression: str, words: str) -> None:
    message = failure(expression, device({"n": 1}))
    assert message.startswith("CEL runtime error: ")
    assert words in message


def test_invalid_version_attribute() -> None:
    dev = device({"v": draobjects.SemVer("1.0")})
    assert failure('device.attributes["dra.example.com"].v.major() == 1', dev) == (
        "CEL runtime error: attribute v: parse semantic version: No Major.Minor.Patch elements "
        "found"
    )


def test_sentences_as_the_allocator_writes_them() -> None:
    dev = device({"model": "a100"}, name="instance-1")
    with pytest.raises(expressions.SelectorError) as caught:
        verdict('device.attributes["dra.example.com"].memory > 1', dev)
    error = caught.value
    # v1.37 (dynamicresources_test.go): the device named, a hint added to "no such key".
    assert error.sentence(
        "claim default/my-pod-my-resource", 0, "some-driver/worker/instance-1"
    ) == (
        "claim default/my-pod-my-resource: selector #0 on device some-driver/worker/instance-1: "
        "CEL runtime error: no such key: memory. consider using CEL optional chaining (.? "
        "followed by orValue()) or guarding the check with has() for optional fields"
    )
    # v1.34 to v1.36.
    assert error.sentence("class my-resource-class", 1) == (
        "class my-resource-class: selector #1: CEL runtime error: no such key: memory"
    )
    compiled = expressions.compile_selector("1")
    assert compiled.error is not None
    assert compiled.error.sentence("class gpu", 0, "d/p/x") == (
        "class gpu: selector #0: CEL compile error: must evaluate to bool or the unknown type, "
        "not int"
    )


# --- the Kubernetes libraries ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('quantity("200M").compareTo(quantity("0.2G")) == 0', True),
        ('quantity("50M").compareTo(quantity("50Mi")) == -1', True),
        ('quantity("150Mi").isGreaterThan(quantity("100Mi"))', True),
        ('quantity("100M").isLessThan(quantity("50M"))', False),
        ('quantity("1Gi") == quantity("1024Mi")', True),
        ('quantity("50k").add(20).sub(quantity("100k")).sub(-50000) == quantity("20")', True),
        ('quantity("50k").sub(20000).asApproximateFloat() == 30000.0', True),
        ('quantity("50000000G").isInteger()', True),
        ('quantity("9999999999999999999999999999999999999G").isInteger()', False),
        ('sign(quantity("-1m")) == -1', True),
        ('isQuantity("200K")', False),
        ('semver("1.2.3").compareTo(semver("0.1.2")) == 1', True),
        ('semver("1.0.0-alpha").isLessThan(semver("1.0.0"))', True),
        ('semver("1.0.0-alpha.1").isLessThan(semver("1.0.0-alpha.beta"))', True),
        ('semver("1.0.0+build.1") == semver("1.0.0")', True),
        ('semver("v01.2", true) == semver("1.2.0")', True),
        ('semver("3.4.5").major() == 3 && semver("3.4.5").minor() == 4', True),
        ('isSemver("1.2")', False),
        ('" Fish ".trim().lowerAscii() == "fish"', True),
        ('"a-b-c".split("-").join("+") == "a+b+c"', True),
        ('"fish".upperAscii().replace("I", "1") == "F1SH"', True),
        ('"gpu-0".indexOf("-") == 3 && "gpu-0".substring(4) == "0"', True),
        ('"a1b22".findAll("[0-9]+") == ["1", "22"]', True),
        ('"a1b22".find("[0-9]+") == "1"', True),
        ("[3, 1, 2].sum() == 6 && [3, 1, 2].max() == 3 && ![3, 1, 2].isSorted()", True),
        ("[1, [2, 3]].flatten() == [1, 2, 3]", True),
        ("sets.contains([1, 2, 3], [2]) && sets.intersects([1], [1, 4])", True),
        ("cel.bind(x, 40, x + 2 == 42)", True),
    ],
)
def test_libraries(expression: str, expected: bool) -> None:
    assert verdict(expression) is expected


def test_integers_and_doubles() -> None:
    dev = device({"cores": 8})
    # An attribute is dyn, so it compares across numeric types, as cel-go's
    # CrossTypeNumericComparisons; equality never holds between a bool and a number.
    assert verdict('device.attributes["dra.example.com"].cores > 4.5', dev)
    assert verdict('device.attributes["dra.example.com"].cores == 8.0', dev)
    assert verdict("7 / 2 == 3")
    assert not verdict('device.attributes["dra.example.com"].b == 1', device({"b": True}))


def test_driver_domain_rule() -> None:
    # A name without a domain is in the driver's; a qualified one stays in its own domain.
    dev = device({"model": "a100", "other.example.com/model": "h100"})
    assert verdict('device.attributes["gpu.example.com"].model == "a100"', dev, "gpu.example.com")
    assert verdict('device.attributes["other.example.com"].model == "h100"', dev, "x")
    assert not verdict('"dra.example.com" in device.attributes', dev, "gpu.example.com")
    capacity = device(capacity={"memory": "80Gi"})
    assert verdict(
        'device.capacity["gpu.example.com"].memory.compareTo(quantity("10Gi")) >= 0',
        capacity,
        "gpu.example.com",
    )


def test_compiled_once_per_expression() -> None:
    first = expressions.compile_selector('device.driver == "once.example.com"')
    assert expressions.compile_selector('device.driver == "once.example.com"') is first


# --- verdicts kept until the slice changes ---------------------------------------------------


def a_slice(version: str, *devices: draobjects.Device) -> draobjects.ResourceSlice:
    return draobjects.ResourceSlice(
        name="node-1-gpus",
        driver="gpu.example.com",
        pool="node-1",
        generation=1,
        slice_count=1,
        selection=draobjects.NodeSelection(node_name="node-1"),
        devices=devices,
        resource_version=version,
    )


BIG = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0'


def test_verdict_evaluated_once_until_the_slice_changes() -> None:
    verdicts = expressions.SelectorVerdicts()
    small, big = device(capacity={"memory": "16Gi"}, name="gpu-0"), None
    big = device(capacity={"memory": "80Gi"}, name="gpu-1")
    old = a_slice("10", small, big)
    assert [verdicts.matches(BIG, old, d) for d in old.devices] == [False, True]
    assert [verdicts.matches(BIG, old, d) for d in old.devices] == [False, True]
    assert verdicts.evaluations == 2
    # The same slice read again (a relist: another object, the same resourceVersion).
    again = a_slice("10", small, big)
    assert verdicts.matches(BIG, again, again.devices[0]) is False
    assert verdicts.evaluations == 2
    # The driver grew gpu-0's memory: a new resourceVersion, evaluated again.
    grown = device(capacity={"memory": "48Gi"}, name="gpu-0")
    new = a_slice("11", grown, big)
    assert verdicts.matches(BIG, new, grown) is True
    assert verdicts.evaluations == 3
    assert len(verdicts) == 1  # the old version's verdicts are gone


def test_errors_are_kept_too_and_forget_drops_a_slice() -> None:
    verdicts = expressions.SelectorVerdicts()
    dev = device({"model": "a100"}, name="gpu-0")
    kept = a_slice("3", dev)
    expression = 'device.attributes["gpu.example.com"].memory > 1'
    for _ in range(2):
        with pytest.raises(expressions.SelectorError, match="no such key: memory"):
            verdicts.matches(expression, kept, dev)
    assert verdicts.evaluations == 1
    verdicts.forget("node-1-gpus")
    with pytest.raises(expressions.SelectorError):
        verdicts.matches(expression, kept, dev)
    assert verdicts.evaluations == 2


def test_slices_without_resource_version_are_told_apart_by_identity() -> None:
    verdicts = expressions.SelectorVerdicts()
    first = a_slice("", device(capacity={"memory": "16Gi"}, name="gpu-0"))
    second = a_slice("", device(capacity={"memory": "80Gi"}, name="gpu-0"))
    assert verdicts.matches(BIG, first, first.devices[0]) is False
    assert verdicts.matches(BIG, second, second.devices[0]) is True
    assert verdicts.evaluations == 2


def test_quantity_values_are_exact() -> None:
    dev = draobjects.Device(
        name="gpu-0",
        capacity=MappingProxyType(
            {"memory": draobjects.Capacity(draobjects.Quantity(Fraction(1, 1000), "1m"))}
        ),
    )
    assert verdict('device.capacity["dra.example.com"].memory == quantity("1m")', dev)
    assert verdict('device.capacity["dra.example.com"].memory.isLessThan(quantity("2m"))', dev)
