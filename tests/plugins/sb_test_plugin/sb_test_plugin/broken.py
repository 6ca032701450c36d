"""``sbbroken``: raises while it is imported."""

raise RuntimeError("sbbroken cannot be imported")
