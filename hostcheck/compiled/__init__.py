"""The profile schema compiled to Python (written by hostcheck.schema_build): what the
generated validators raise, without importing fastjsonschema or jsonschema at run time."""


class JsonSchemaValueException(ValueError):
    """A document the schema rejects; hostcheck.config then asks jsonschema why."""

    def __init__(self, message, value=None, name=None, definition=None, rule=None):
        super().__init__(message)
        self.value, self.name, self.definition, self.rule = value, name, definition, rule


JsonSchemaValuesException = JsonSchemaValueException
