"""The report layer: one module per command renders its report as text and as one versioned
JSON document (its schema in `schemas/`, which pins its version: `json.schema_versions`); matrix
also as HTML.
`findings` and `gpu` hold what several commands render alike."""
