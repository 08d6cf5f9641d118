"""The arena forum's Django project package (settings and URLs around Spirit)."""
