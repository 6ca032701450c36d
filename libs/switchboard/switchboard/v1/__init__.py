"""Generated protobuf and gRPC code (``make proto``); do not edit by hand."""
