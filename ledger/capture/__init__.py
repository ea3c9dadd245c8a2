"""Capturing what a run is: settings, the training command, environment, image and host."""
