"""Recognising ONNX Runtime's provider bridge in function names.

The bridge: provider code calls `Provider_GetHost()->Class__Method(...)`, a virtual method of
`ProviderHost` implemented by `ProviderHostImpl::Class__Method`, which calls the real
`Class::Method`. In a static build the "real" `Class::Method` is the provider's bridge stub
again, so the two call each other for ever. Host method names flatten template arguments:
`DataTypeImpl::GetType<float>` ↔ `ProviderHostImpl::DataTypeImpl__GetType_float`.
"""

from __future__ import annotations

import re

from workbench.debugging.cpp_names import flatten_template, short_name, split_scope
from workbench.debugging.model import BridgePair

HOST_CLASS = re.compile(r"^ProviderHost\w*$")
HOST_METHOD = re.compile(r"^(?P<cls>[A-Za-z_][A-Za-z0-9_]*?)__(?P<method>[A-Za-z0-9_]+)$")
GET_HOST = re.compile(r"(^|::)Provider_GetHost(CPU)?$")


def is_get_host(function: str) -> bool:
    """`Provider_GetHost` / `Provider_GetHostCPU`: the bridge's way back into the host."""
    return bool(GET_HOST.search(function))


def host_method_parts(function: str) -> tuple[str, str] | None:
    """`ns::ProviderHostImpl::DataTypeImpl__GetType_float` → ("DataTypeImpl", "GetType_float")."""
    parts = split_scope(function)
    if len(parts) < 2 or not HOST_CLASS.match(parts[-2]):
        return None
    found = HOST_METHOD.match(parts[-1])
    return (found.group("cls"), found.group("method")) if found else None


def member_parts(function: str) -> tuple[str, str] | None:
    """`onnxruntime::DataTypeImpl::GetType<float>` → ("DataTypeImpl", "GetType_float")."""
    parts = split_scope(function)
    if len(parts) < 2:
        return None
    owner = parts[-2].split("<", 1)[0]
    return owner, flatten_template(parts[-1])


def counterpart_matches(host_method: str, function: str) -> bool:
    """Whether `function` is what `host_method` forwards to (either naming order)."""
    host = host_method_parts(host_method)
    member = member_parts(function)
    if host is None or member is None or host_method_parts(function):
        return False
    first, second = host
    return member in ((first, second), (second, first))


def host_method_for(function: str, host_class: str = "ProviderHostImpl") -> str:
    """The host method name ORT would give the bridge for `function` (`A::B<T>` → `A__B_T`)."""
    member = member_parts(function)
    if member is None:
        return f"{host_class}::{function}"
    return f"{host_class}::{member[0]}__{member[1]}"


def find_pair(functions: list[str], stub_callers: set[str]) -> BridgePair | None:
    """The bridge pair among a loop's functions.

    functions: every function seen in the loop; stub_callers: functions seen calling
    Provider_GetHost (the provider's bridge stubs). A pair is found when a host method and
    its counterpart are both there, or one of them is there and the loop goes through
    Provider_GetHost (at -O2 the host method is a single jump and is rarely sampled).
    """
    hosts = [function for function in functions if host_method_parts(function)]
    others = [function for function in functions if not host_method_parts(function)]
    goes_through_host = any(is_get_host(function) for function in functions) or bool(stub_callers)
    for host in hosts:
        for other in others:
            if counterpart_matches(host, other):
                return _pair(host, other)
    for host in hosts:
        if goes_through_host:
            cls, method = host_method_parts(host) or ("", "")
            return _pair(host, f"{cls}::{method}")
    for other in others:
        if other in stub_callers and not is_get_host(other):
            return _pair(host_method_for(other), other)
    return None


def _pair(host: str, counterpart: str) -> BridgePair:
    member = member_parts(counterpart) or ("", "")
    return BridgePair(
        host_method=short_name(host),
        counterpart=short_name(counterpart),
        bridge_class=member[0],
        bridge_method=split_scope(counterpart)[-1],
    )
