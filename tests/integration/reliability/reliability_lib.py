"""Constants shared by the reliability suite's conftest and tests (a plain module: `conftest` itself is
not importable by name, two folders have one)."""

# A token of the lab's root@pam that expired in 1970 (added to the seed by the `sim` fixture).
EXPIRED_TOKEN_ID = "root@pam!expired"
EXPIRED_TOKEN_SECRET = "5e1e0c5a-7d2b-4c4e-9a51-0000000000ee"
