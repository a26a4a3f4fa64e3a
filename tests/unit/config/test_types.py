"""Option value types: parsing, coercion, formatting and the 'allowed' text of refusals."""

from __future__ import annotations

import pytest

from openum.config._types import (
    AddressPort,
    Bool,
    CallbackType,
    Int,
    Interface,
    IPv4,
    OptionValueError,
    PortRange,
    Str,
    choices,
    int_choices,
)


def test_int_parses_decimal_and_hex_and_checks_range() -> None:
    t = Int(0, 65535)
    assert t.parse("14371") == 14371
    assert t.parse(" 0x10 ") == 16
    assert t.coerce(5) == 5
    with pytest.raises(OptionValueError) as err:
        t.parse("70000")
    assert err.value.allowed == "an integer from 0 to 65535"
    for bad in ("", "12ab", "1.5", "ten"):
        with pytest.raises(OptionValueError):
            t.parse(bad)
    with pytest.raises(OptionValueError):
        t.coerce(True)  # a bool is not an integer option value


def test_bool_is_written_1_or_0() -> None:
    t = Bool()
    assert t.parse("1") is True
    assert t.parse("0") is False
    assert t.coerce(True) is True
    assert t.coerce(0) is False
    assert t.format(True) == "1"
    with pytest.raises(OptionValueError) as err:
        t.parse("yes")
    assert "1" in err.value.allowed and "0" in err.value.allowed


def test_enum_is_case_insensitive_with_aliases() -> None:
    t = choices("tcp", "lbtrm", aliases={"lbt-rm": "lbtrm"})
    assert t.parse("LBT-RM") == "lbtrm"
    assert t.parse("tcp") == "tcp"
    with pytest.raises(OptionValueError) as err:
        t.parse("udp")
    assert "tcp" in err.value.allowed and "lbt-rm" in err.value.allowed


def test_int_enum_keeps_integers() -> None:
    t = int_choices((1, 0, -1))
    assert t.parse("-1") == -1
    assert t.coerce(0) == 0
    assert t.format(-1) == "-1"
    with pytest.raises(OptionValueError):
        t.parse("2")


def test_ipv4_and_multicast() -> None:
    assert IPv4().parse("127.0.0.1") == "127.0.0.1"
    assert IPv4(multicast=True).parse("224.9.10.11") == "224.9.10.11"
    with pytest.raises(OptionValueError):
        IPv4(multicast=True).parse("10.0.0.1")
    with pytest.raises(OptionValueError):
        IPv4().parse("256.1.1.1")


def test_interface_forms() -> None:
    t = Interface()
    assert t.parse("127.0.0.1") == "127.0.0.1"
    assert t.parse("10.29.4.7/24") == "10.29.4.0/24"
    assert t.parse("lo") == "lo"
    with pytest.raises(OptionValueError):
        t.parse("1.2.3")


def test_address_port_forms() -> None:
    daemon = AddressPort(with_interface=True, list_valued=True)
    assert daemon.multi is True
    assert daemon.parse("127.0.0.1:15380") == "127.0.0.1:15380"
    assert daemon.parse("lo->127.0.0.1:15380") == "lo->127.0.0.1:15380"
    assert daemon.coerce(["127.0.0.1:1", "127.0.0.1:2"]) == ("127.0.0.1:1", "127.0.0.1:2")
    store = AddressPort(with_suffix=True)
    assert store.parse("127.0.0.1:29999:7") == "127.0.0.1:29999:7"
    assert store.multi is False
    for bad in ("127.0.0.1", "127.0.0.1:99999", "x:1", "lo->127.0.0.1:1"):
        with pytest.raises(OptionValueError):
            AddressPort().parse(bad)


def test_port_range() -> None:
    t = PortRange()
    assert t.parse("14371-14390") == (14371, 14390)
    assert t.format((1, 2)) == "1-2"
    with pytest.raises(OptionValueError):
        t.parse("20-10")


def test_string_limits() -> None:
    assert Str(max_length=3).parse("abc") == "abc"
    with pytest.raises(OptionValueError):
        Str(max_length=3).parse("abcd")
    with pytest.raises(OptionValueError):
        Str(pattern=r"[a-z]+", pattern_doc="lower-case letters").parse("A1")


def test_callbacks_only_from_code() -> None:
    t = CallbackType()

    def cb() -> None:
        pass

    assert t.coerce(cb) == (cb, None)
    assert t.coerce((cb, 5)) == (cb, 5)
    assert t.coerce(None) is None
    with pytest.raises(OptionValueError) as err:
        t.parse("my_function")
    assert "code" in str(err.value)
