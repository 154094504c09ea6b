"""The built-in ``mail`` skill: send over SMTP, search and read over IMAP."""
