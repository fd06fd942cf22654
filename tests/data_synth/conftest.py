"""A small domain description shared by the synthesis tests: notebooks hold notes."""

import pytest

SMALL = """
domain: notes
title: the notes service
clock: "2025-01-10T12:00:00"
rules: [Only open notebooks take new notes.]
tables:
  notebooks:
    key: notebook_id
    id_prefix: NB
    rows: 8
    fields:
      notebook_id: {type: string}
      owner: {type: string, fake: name}
      status: {type: string, choices: [open, open, closed], enum: true}
  notes:
    key: note_id
    id_prefix: N
    rows: 20
    fields:
      note_id: {type: string}
      notebook_id: {type: string, ref: notebooks}
      text: {type: string, fake: sentence}
      stars: {type: integer, range: [0, 5]}
tools:
  - name: get_note
    description: Look up a note.
    parameters: {note_id: {type: string, description: The note id.}}
    load: [{as: note, table: notes, key: args.note_id}]
    sample: {note_id: {from: notes}}
    ask: "tell me how many stars note {note_id} has"
    tell: result.stars
  - name: add_note
    description: Add a note to an open notebook.
    parameters:
      notebook_id: {type: string, description: The notebook id.}
      text: {type: string, description: The text.}
    load: [{as: book, table: notebooks, key: args.notebook_id}]
    require: [{if: "book.status == 'open'", error: the notebook is closed}]
    create: {as: note, table: notes, values: {notebook_id: args.notebook_id, text: args.text, stars: "0"}}
    sample: {notebook_id: {from: notebooks, where: "row.status == 'open'"}, text: {fake: sentence}}
    ask: "add the note '{text}' to notebook {notebook_id} and tell me its id"
    tell: result.note_id
  - name: star_note
    description: Give a note one more star, at most 5.
    parameters: {note_id: {type: string, description: The note id.}}
    load: [{as: note, table: notes, key: args.note_id}]
    require: [{if: "note.stars < 5", error: the note has 5 stars already}]
    update: [{row: note, set: {stars: note.stars + 1}}]
    sample: {note_id: {from: notes, where: "row.stars < 5"}}
    ask: "give note {note_id} one more star"
"""


@pytest.fixture
def small_description(tmp_path):
  path = tmp_path / "notes.yaml"
  path.write_text(SMALL)
  return path
