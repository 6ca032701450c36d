"""The deployment files of every service, generated from the registry.

``python -m switchboard.deploygen`` writes, from ``registry.SERVICES`` and the few hand-tuned
values of :mod:`.overrides`: each service's ``k8s/base/<name>.yaml`` and the
PodDisruptionBudgets (whole files), its NetworkPolicy, its Compose service, its NATS user's
password variables and its place in the kustomizations (blocks between ``# BEGIN generated``
and ``# END generated`` in hand-written files), and the NATS users' configuration
(:mod:`switchboard.natsauth`). ``--check`` writes nothing and fails on any difference, so a
hand edit of a generated block, or a registry entry without its files, fails ``make lint``.
Why generated: adding the media service touched 13 deployment files by hand (issue 26).
"""
