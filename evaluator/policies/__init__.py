"""Policies behind one interface. A policy sees only the sanitized mailbox message.

It may import the protocol core and native/ (frames as PNG; a TorchScript module runs in a native worker process).
"""
