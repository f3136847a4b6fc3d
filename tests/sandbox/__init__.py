"""The sandbox fleet: real SSH hosts in their own namespaces on this machine."""
