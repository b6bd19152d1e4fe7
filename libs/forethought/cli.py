def main() -> None:
    print("forethought")
