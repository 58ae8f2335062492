"""Shared by the unit tests under tests/unit/.

The tests import the collection as ``ansible_collections.eagle3.extraction`` through
.ansible/collections (pytest.ini's ``pythonpath``), the way ansible-test units does.
"""
