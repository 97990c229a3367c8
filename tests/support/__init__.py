"""Support code for the tests: plain modules, never collected, never importing ``conftest``."""
