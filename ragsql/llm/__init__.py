"""What the judge and the embedders share: endpoint settings, call records, request hashes, token counts, rate limits."""
