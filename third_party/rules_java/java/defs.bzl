"""Offline shim of @rules_java//java:defs.bzl: thin wrappers over Bazel's native Java rules."""

def java_import(**attrs):
    native.java_import(**attrs)

def java_runtime(**attrs):
    native.java_runtime(**attrs)

def java_toolchain(**attrs):
    native.java_toolchain(**attrs)
