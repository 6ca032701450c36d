"""Tool calls that need a person's approval: the rules (pure), the gate between a
model's call and the executors, the stored approvals and checkpoints, deciding from a chat,
and the notice a chat gets."""
