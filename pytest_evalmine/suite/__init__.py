"""Suite files: the JSON Schema, YAML loading and validation, prompt templating, and the
canonical JSON every hash in the project uses. Owns ``Suite``, ``Task``, ``Case`` and
``Label``. May import only ``errors`` and the standard library (jsonschema and PyYAML
lazily); everything else imports from here."""
