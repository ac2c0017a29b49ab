"""Reading a page as a browser shows it: the render worker's browser, its egress, the hand-off."""
