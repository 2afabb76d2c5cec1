"""A served model's one road, from where it comes to the runtime's ``prepare()``.

The entry decides the road once (:mod:`.plan`: a fresh architecture, a training run's model,
the user's file or MLflow model, a text model), fills a folder for it (:mod:`.prepare`, with
:mod:`.fetch`, :mod:`.fresh`, :mod:`.user_files`, :mod:`..text_model` in processes of their
own) described by its :class:`~.manifest.SourceManifest`; the measured worker reads it back
(:mod:`.load`). Each backend says which file kinds it reads (``mlflow_dlaas.backends.formats``).
"""
