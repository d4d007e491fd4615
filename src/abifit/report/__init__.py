"""The report layer: one module per command renders its report as text and as one versioned
JSON document (`json.SCHEMA_VERSION`, a schema per command in `schemas/`); matrix also as HTML.
`findings` and `gpu` hold what several commands render alike."""
