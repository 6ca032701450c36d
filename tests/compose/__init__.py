"""The Compose smoke run (``make compose-smoke``, README "Compose"): docker-compose.yml in real
containers under podman, where no image registry is reachable. Not collected by pytest; the
offline checks of what it runs are tests/deploy/test_compose_smoke.py."""
