"""The CypherTurn session generator, metrics and reports. Not built yet: see the open issues and
DESIGN §5 and §7."""
