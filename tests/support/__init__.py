"""Test support shared by the cross-service and service tests."""
