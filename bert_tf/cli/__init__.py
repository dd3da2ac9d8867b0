"""What every script does before its work: flags, start-up checks, errors."""
