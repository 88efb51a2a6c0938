"""What the worker hears in each segment it made before it counts as done: signal checks, a
recognizer's round trip against the text, a verdict, and what decides to make a segment again."""
