"""The report layer: one module per command renders its report as text and as one versioned
JSON document (each its version in `json.SCHEMA_VERSIONS`, its schema in `schemas/`); matrix
also as HTML.
`findings` and `gpu` hold what several commands render alike."""
