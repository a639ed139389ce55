"""Icons, the app icon and the stylesheet template, loaded with importlib.resources."""
