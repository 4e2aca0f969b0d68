"""Suite files: the JSON Schema, loading and validation, prompt templating, and the canonical
JSON every hash in the project uses. The records (``Suite``, ``Task``, ``Case``, ``Label``)
are ``model``'s; loading is one pipeline, ``reading`` -> ``validate`` -> ``resolve`` ->
``build``, that ``loader.load_suite`` composes. May import only ``errors``, ``options`` and
the standard library (jsonschema and PyYAML lazily); everything else imports from here."""
