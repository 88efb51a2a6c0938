"""Voices (`/v1/voices`): the listing and one voice; registering and deleting a voice."""
