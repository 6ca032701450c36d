"""The Compose smoke run (``make compose-smoke``, docs/compose.md): docker-compose.yml in real
containers under podman, where no image registry is reachable. Not collected by pytest; the
offline checks of what it runs are tests/deploy/test_compose_smoke.py."""
