"""What the tests share: fakes and builders for the unit tests, the steps and records of the
integration, end-to-end and side-by-side tests, and the test doubles run inside a real
``plumb run``. Fixtures every test of a directory may use stay in its conftest.py; the few a
test module opts into (``scheduler``, ``storage``, ``scene``) are imported from here."""
