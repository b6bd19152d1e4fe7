"""``python -m forethought.access``: prints a new bearer token and the SHA-256 the tenants file stores."""

from forethought.access.tenants import new_token, token_hash

if __name__ == "__main__":
    token = new_token()
    print(f"token:        {token}")
    print(f"token_sha256: {token_hash(token)}")
