"""The extender protocol's wire types, as marshmallow schemas."""
