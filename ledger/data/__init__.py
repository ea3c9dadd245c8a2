"""A run's bulky outputs: finding them in the training command and tracking them with DVC."""
