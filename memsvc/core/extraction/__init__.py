"""Rule-based fact extraction: the rules as data, whose words a fact is, and how it is said."""
