"""The fleet tests (see conftest.py). A package, so that its conftest and
modules are imported as fleet.conftest, fleet.fleetutil, ... beside
tests/e2e's own conftest, which they use."""
